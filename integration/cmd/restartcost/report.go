package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

func printReport(results []*roundResult) {
	// Restarts are grouped by size and by when the writes were made.
	type group struct {
		size int
		at   string
	}
	var groups []group
	for _, r := range results {
		if g := (group{r.size, r.writeAt}); !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	of := func(g group) []*roundResult {
		var out []*roundResult
		for _, r := range results {
			if r.size == g.size && r.writeAt == g.at {
				out = append(out, r)
			}
		}
		return out
	}

	fmt.Println()
	fmt.Println("Cost of one restart, per side, from the kill until every write was seen, every wait returned and neither side's proxy carried a byte for " +
		quiet.String() + ": requests that reached the side's proxy, and bytes on the side's connections to it (requests sent + responses received: HTTP/1.1 headers, bodies as the apiserver encoded them, watch streams as they flowed). Traffic ended: the side's last byte, in seconds after the apiserver was back (/readyz).")
	fmt.Println()
	fmt.Println("| objects per informer | writes at | restart | apiserver gone → port open → /readyz (s) | requests: plain | ours | ours / plain | MB: plain | ours | ours / plain | traffic ended, plain / ours (s) |")
	fmt.Println("| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, g := range groups {
		rs, n, at := of(g), g.size, g.at
		var pr, or, pb, ob float64
		for _, r := range rs {
			note := ""
			if !r.endedQuiet {
				note = " (window bound reached)"
			}
			if r.startRetries > 0 {
				note += fmt.Sprintf(" (the apiserver failed to start %d time(s) first)", r.startRetries)
			}
			fmt.Printf("| %d | %s | %d | %s → %s | %d | %d | %s | %s | %s | %s | %.1f / %.1f%s |\n", n, at, r.round,
				secs(r.portOpen), secs(r.outage), r.plain.requests, r.ours.requests, ratio(float64(r.ours.requests), float64(r.plain.requests)),
				mbf(r.plain.bytes()), mbf(r.ours.bytes()), ratio(float64(r.ours.bytes()), float64(r.plain.bytes())),
				r.plainEnd.Seconds(), r.oursEnd.Seconds(), note)
			pr += float64(r.plain.requests)
			or += float64(r.ours.requests)
			pb += float64(r.plain.bytes())
			ob += float64(r.ours.bytes())
		}
		if len(rs) > 1 {
			k := float64(len(rs))
			fmt.Printf("| %d | %s | mean | | %.0f | %.0f | %s | %s | %s | %s | |\n", n, at, pr/k, or/k, ratio(or, pr),
				mbf(uint64(pb/k)), mbf(uint64(ob/k)), ratio(ob, pb))
		}
	}

	fmt.Println()
	fmt.Println("A write per informer right after the apiserver was back (all at once, through a client of neither side; writes at ready: once /readyz passed; at port: as soon as the apiserver's port accepted connections, retried until taken), ms from the moment the write returned: until the side's informer handed the written object (at or past the write's resource version) to its handlers, which client-go does after its indexer (so its lister) holds it (negative: the event came before the write's response); and until our WaitForFreshness(writtenRV), started at that moment, returned. \"ours wait − plain lister\" is per write, with a plain sighting before the write returned counted as 0 (the wait cannot start earlier): positive means our wait released later than plain client-go's lister showed the write (counted in \"waits later\", all of them, and those later by more than 1 ms: a write both sides had before it returned counts as later by the wait call's own microseconds); \"ours wait − ours lister\" the same against our own informer's lister: how long the wait was held after our cache had the write. Pooled over the restarts; quantiles nearest-rank. \"with write\": waits that returned nil with the written object in the indexer; \"without\": nil without it (a broken guarantee).")
	fmt.Println()
	fmt.Println("| objects per informer | writes at | writes | write returned after /readyz, p50 / max (ms) | plain lister p50 / p99 / max | ours lister p50 / p99 / max | ours wait p50 / p99 / max | ours wait − plain lister p50 / p99 / max | waits later than plain's lister: all / by over 1 ms | ours wait − ours lister p50 / p99 / max | waits nil: with write / without | wait errors, writes failed, never seen (plain / ours) |")
	fmt.Println("| ---: | --- | ---: | --- | --- | --- | --- | --- | ---: | --- | --- | --- |")
	for _, g := range groups {
		n, at := g.size, g.at
		var after, plainL, oursL, wait, diff, held []time.Duration
		var later, later1 int
		var with, without, waitErrs, writeErrs, unseenP, unseenO int
		var errSamples []string
		for _, r := range of(g) {
			for _, w := range r.writes {
				if w.err != nil {
					writeErrs++
					errSamples = append(errSamples, "write: "+w.err.Error())
					continue
				}
				after = append(after, w.afterBack)
				if w.plainSeen != never {
					plainL = append(plainL, w.plainSeen)
				} else {
					unseenP++
				}
				if w.oursSeen != never {
					oursL = append(oursL, w.oursSeen)
				} else {
					unseenO++
				}
				if w.waitErr != nil {
					waitErrs++
					errSamples = append(errSamples, "wait: "+w.waitErr.Error())
				} else {
					wait = append(wait, w.oursWait)
					if w.plainSeen != never {
						d := w.oursWait - max(w.plainSeen, 0)
						diff = append(diff, d)
						if d > 0 {
							later++
						}
						if d > time.Millisecond {
							later1++
						}
					}
					if w.oursSeen != never {
						held = append(held, w.oursWait-max(w.oursSeen, 0))
					}
				}
				if w.cached {
					with++
				}
				if w.waitReturnedBeforeWrite {
					without++
				}
			}
		}
		fmt.Printf("| %d | %s | %d | %s / %s | %s | %s | %s | %s | %d / %d | %s | %d / %d | %d, %d, %d / %d |\n", n, at, len(after)+writeErrs,
			msf(quantile(after, 0.5)), msf(quantile(after, 1)), q3(plainL), q3(oursL), q3(wait), q3(diff), later, later1, q3(held), with, without, waitErrs, writeErrs, unseenP, unseenO)
		if len(errSamples) > 0 {
			slices.Sort(errSamples)
			errSamples = slices.Compact(errSamples)
			for _, e := range errSamples[:min(3, len(errSamples))] {
				fmt.Printf("\n- size %d, writes at %s: %s", n, at, e)
			}
			fmt.Println()
		}
	}

	fmt.Println()
	fmt.Println("What each side sent, per restart (mean over the restarts): requests by shape, from the URL (rv=\"\": resourceVersion unset, a consistent read; rv=0: any; rv=N: a number; match: resourceVersionMatch; timeout: a watch's timeoutSeconds when 30 or less, as the library's auxiliary watches; watch-list: sendInitialEvents=true), by outcome (HTTP status; \"ERROR event\": a watch answered 200 whose first event is an ERROR, e.g. 410 too old resource version; \"canceled\": the client gave up before the response came, as the library does with a probe no longer needed; \"reset\": the proxy could not reach the apiserver), and response body bytes.")
	fmt.Println()
	fmt.Println("| objects per informer | writes at | side | request | outcome | per restart | response body KiB per restart |")
	fmt.Println("| ---: | --- | --- | --- | --- | ---: | ---: |")
	for _, g := range groups {
		rs, n, at := of(g), g.size, g.at
		k := float64(len(rs))
		for _, sd := range []string{"plain", "ours"} {
			type agg struct {
				shape, outcome string
				count          int
				body           uint64
			}
			m := map[[2]string]*agg{}
			for _, r := range rs {
				for _, q := range r.reqs {
					if q.side != sd {
						continue
					}
					key := [2]string{q.shape(), q.outcome()}
					a := m[key]
					if a == nil {
						a = &agg{shape: key[0], outcome: key[1]}
						m[key] = a
					}
					a.count++
					a.body += q.body.Load()
				}
			}
			var rows []*agg
			for _, a := range m {
				rows = append(rows, a)
			}
			slices.SortFunc(rows, func(a, b *agg) int {
				return cmp.Or(cmp.Compare(b.count, a.count), cmp.Compare(a.shape, b.shape), cmp.Compare(a.outcome, b.outcome))
			})
			for _, a := range rows {
				fmt.Printf("| %d | %s | %s | %s | %s | %s | %s |\n", n, at, sd, a.shape, a.outcome, num(float64(a.count)/k), num(float64(a.body)/1024/k))
			}
		}
	}

	buckets := []struct {
		name     string
		from, to time.Duration
	}{{"before back", -time.Hour, 0}, {"0–1 s", 0, time.Second}, {"1–2 s", time.Second, 2 * time.Second}, {"2–5 s", 2 * time.Second, 5 * time.Second},
		{"5–10 s", 5 * time.Second, 10 * time.Second}, {"10–30 s", 10 * time.Second, 30 * time.Second}, {"30 s +", 30 * time.Second, 24 * time.Hour}}
	fmt.Println()
	fmt.Println("When each side's requests started, relative to the apiserver being back (/readyz), per restart (mean):")
	fmt.Println()
	head := "| objects per informer | writes at | side |"
	sep := "| ---: | --- | --- |"
	for _, b := range buckets {
		head += " " + b.name + " |"
		sep += " ---: |"
	}
	fmt.Println(head)
	fmt.Println(sep)
	for _, g := range groups {
		rs, n, at := of(g), g.size, g.at
		for _, sd := range []string{"plain", "ours"} {
			counts := make([]int, len(buckets))
			for _, r := range rs {
				for _, q := range r.reqs {
					if q.side != sd {
						continue
					}
					t := q.started.Sub(r.back)
					for i, b := range buckets {
						if t >= b.from && t < b.to {
							counts[i]++
						}
					}
				}
			}
			line := fmt.Sprintf("| %d | %s | %s |", n, at, sd)
			for _, c := range counts {
				line += " " + num(float64(c)/float64(len(rs))) + " |"
			}
			fmt.Println(line)
		}
	}

	fmt.Println()
	fmt.Println("When each side's caches were whole again: the moment each watch-list's initial events ended (its bookmark annotated k8s.io/initial-events-end went through the proxy), in seconds after the apiserver was back (/readyz; negative: before), per restart pooled; and how many watch-lists got that far.")
	fmt.Println()
	fmt.Println("| objects per informer | writes at | side | watch-lists complete | p50 | p90 | max |")
	fmt.Println("| ---: | --- | --- | ---: | ---: | ---: | ---: |")
	for _, g := range groups {
		rs, n, at := of(g), g.size, g.at
		for _, sd := range []string{"plain", "ours"} {
			var ends []time.Duration
			total := 0
			for _, r := range rs {
				for _, q := range r.reqs {
					if q.side != sd || !q.watchList() {
						continue
					}
					total++
					if e := q.initialEnd.Load(); e != 0 {
						ends = append(ends, time.Unix(0, e).Sub(r.back))
					}
				}
			}
			if total == 0 {
				continue
			}
			fmt.Printf("| %d | %s | %s | %d of %d | %s | %s | %s |\n", n, at, sd, len(ends), total,
				secs(quantile(ends, 0.5)), secs(quantile(ends, 0.9)), secs(quantile(ends, 1)))
		}
	}

	fmt.Println()
	fmt.Println("How long each side's watch-lists took to send their initial events, by resource: from the response's headers to the bookmark that ends them, in seconds, per restart pooled (each side's 20-odd watch-lists of a kind share the apiserver's pace of serving that kind).")
	fmt.Println()
	fmt.Println("| objects per informer | writes at | resource | plain: p50 / max | ours: p50 / max |")
	fmt.Println("| ---: | --- | --- | --- | --- |")
	for _, g := range groups {
		rs := of(g)
		for _, k := range splitList(*kindsFlag) {
			cell := func(sd string) string {
				var d []time.Duration
				for _, r := range rs {
					for _, q := range r.reqs {
						if e, h := q.initialEnd.Load(), q.headers.Load(); q.side == sd && q.watchList() && e != 0 && h != 0 && resourceOf(q.path) == k {
							d = append(d, time.Duration(e-h))
						}
					}
				}
				return secs(quantile(d, 0.5)) + " / " + secs(quantile(d, 1))
			}
			fmt.Printf("| %d | %s | %s | %s | %s |\n", g.size, g.at, k, cell("plain"), cell("ours"))
		}
	}

	fmt.Println()
	fmt.Println("The waits released later than plain's lister showed the write (by over 1 ms), by where our informer's watch-list was when the write returned: still sending initial events that predate the write (its snapshot was taken first, so the write comes after them: plain's watch-list, sent after the write, holds it in its initial events, and the two sides' lists race on the apiserver's pace), or past them (both sides were watching: the jitter between two streams); and, for the first, seconds from the write to the end of our watch-list's initial events.")
	fmt.Println()
	fmt.Println("| objects per informer | writes at | later by over 1 ms | ours still sending initial events | ours past them | other | write → ours' initial events end, p50 / max (s) |")
	fmt.Println("| ---: | --- | ---: | ---: | ---: | ---: | --- |")
	for _, g := range groups {
		var later, mid, past, other int
		var toEnd []time.Duration
		for _, r := range of(g) {
			for _, w := range r.writes {
				if w.err != nil || w.waitErr != nil || w.plainSeen == never || w.oursWait-max(w.plainSeen, 0) <= time.Millisecond {
					continue
				}
				later++
				switch q := oursWatchList(r.reqs, w); {
				case q == nil:
					other++
				case w.writtenAt.UnixNano() < q.initialEnd.Load():
					mid++
					toEnd = append(toEnd, time.Duration(q.initialEnd.Load()-w.writtenAt.UnixNano()))
				default:
					past++
				}
			}
		}
		fmt.Printf("| %d | %s | %d | %d | %d | %d | %s / %s |\n", g.size, g.at, later, mid, past, other, secs(quantile(toEnd, 0.5)), secs(quantile(toEnd, 1)))
	}

	fmt.Println()
	fmt.Println("Our informers' counters over the window, summed over the informers, per restart (mean): Stats (Lists admitted, Watches, StaleListsRefused, FloorRaised, RestoreProbes: restore checks, Regressions, WatchesStopped, Bookmarks) and ProbeStats (Probes, Requests, Snapshots, SnapshotMatches, Relists, Advances).")
	fmt.Println()
	fmt.Println("| objects per informer | writes at | Lists | Watches | StaleListsRefused | FloorRaised | RestoreProbes | Regressions | WatchesStopped | Bookmarks | Probes | probe Requests | Snapshots | SnapshotMatches | probe Relists | Advances |")
	fmt.Println("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, g := range groups {
		rs, n, at := of(g), g.size, g.at
		var s statsDelta
		for _, r := range rs {
			d := r.stats
			s.lists += d.lists
			s.watches += d.watches
			s.staleRefused += d.staleRefused
			s.floorRaised += d.floorRaised
			s.restoreProbes += d.restoreProbes
			s.regressions += d.regressions
			s.watchesStopped += d.watchesStopped
			s.bookmarks += d.bookmarks
			s.probes += d.probes
			s.probeRequests += d.probeRequests
			s.snapshots += d.snapshots
			s.snapshotMatches += d.snapshotMatches
			s.probeRelists += d.probeRelists
			s.advances += d.advances
		}
		k := float64(len(rs))
		f := func(v uint64) string { return num(float64(v) / k) }
		fmt.Printf("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n, at, f(s.lists), f(s.watches), f(s.staleRefused),
			f(s.floorRaised), f(s.restoreProbes), f(s.regressions), f(s.watchesStopped), f(s.bookmarks), f(s.probes), f(s.probeRequests),
			f(s.snapshots), f(s.snapshotMatches), f(s.probeRelists), f(s.advances))
	}

	if *qps > 0 {
		fmt.Println()
		fmt.Printf("Client-side throttling (client-go's token bucket, QPS %v, burst %d a side) over the window, per restart (mean): requests that waited 1 ms or more, and their waits summed; the longest wait is over the side's whole life (its sync included).\n", *qps, *burst)
		fmt.Println()
		fmt.Println("| objects per informer | writes at | side | requests throttled | waited, summed (s) | longest wait (ms) |")
		fmt.Println("| ---: | --- | --- | ---: | ---: | ---: |")
		for _, g := range groups {
			rs, n, at := of(g), g.size, g.at
			k := float64(len(rs))
			for _, sd := range []string{"plain", "ours"} {
				var t throttle
				for _, r := range rs {
					x := r.plainThrottle
					if sd == "ours" {
						x = r.oursThrottle
					}
					t.throttled += x.throttled
					t.waited += x.waited
					t.longest = max(t.longest, x.longest)
				}
				fmt.Printf("| %d | %s | %s | %s | %.2f | %s |\n", n, at, sd, num(float64(t.throttled)/k), t.waited.Seconds()/k, msf(t.longest))
			}
		}
	}
}

func q3(d []time.Duration) string {
	if len(d) == 0 {
		return "—"
	}
	return fmt.Sprintf("%s / %s / %s", msf(quantile(d, 0.5)), msf(quantile(d, 0.99)), msf(quantile(d, 1)))
}

// quantile is the nearest-rank q-quantile of d (0 when empty).
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*q+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func msf(d time.Duration) string {
	v := ms(d)
	a := v
	if a < 0 {
		a = -a
	}
	switch {
	case a < 10:
		return fmt.Sprintf("%.2f", v)
	case a < 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) }

func mbf(b uint64) string { return strconv.FormatFloat(float64(b)/1e6, 'f', 2, 64) }

func mb(b uint64) string { return mbf(b) + " MB" }

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 10:
		return strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0"), ".")
	case v < 100:
		return strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(v, 'f', 1, 64), "0"), ".")
	default:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
}

// resourceOf is a namespaced core path's resource: /api/v1/namespaces/NS/RESOURCE.
func resourceOf(path string) string {
	if parts := strings.Split(path, "/"); len(parts) == 6 {
		return parts[5]
	}
	return ""
}

// oursWatchList is our informer's watch-list that w's write met: of those
// of w's namespace and resource that sent all their initial events, the
// last whose headers came before the write returned; nil if none.
func oursWatchList(reqs []*request, w writeResult) *request {
	path := "/api/v1/namespaces/" + w.ns + "/" + w.resource
	var found *request
	for _, q := range reqs {
		if q.side == "ours" && q.watchList() && q.path == path && q.initialEnd.Load() != 0 &&
			q.headers.Load() <= w.writtenAt.UnixNano() && (found == nil || q.headers.Load() > found.headers.Load()) {
			found = q
		}
	}
	return found
}
