package cache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestRandomInterleavings scripts random streams (adds, updates, deletes,
// bookmarks, with an indexer that is sometimes slow) while waiters wait for
// random resource versions. After every successful WaitForFreshness(rv) the
// indexer must hold, for every key, the state of the last scripted event at
// or below rv (or a newer one).
func TestRandomInterleavings(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	forEachMode(t, func(t *testing.T, mode streamMode) {
		for round := range 3 {
			rng := rand.New(rand.NewPCG(seed, uint64(round)+uint64(mode)<<8))
			runInterleaving(t, mode, rng, false)
		}
	})
}

// TestRandomInterleavingsWithStalledReader runs a script while the
// informer's Reflector stops reading its watch until the watch's buffer is
// full, as a starved one does on a loaded machine: the script must not
// outrun it by the fake watch's 100 events, which panics.
func TestRandomInterleavingsWithStalledReader(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	forEachMode(t, func(t *testing.T, mode streamMode) {
		runInterleaving(t, mode, rand.New(rand.NewPCG(seed, uint64(mode))), true)
	})
}

type scriptedEvent struct {
	rv      uint64
	key     string
	deleted bool
}

// runInterleaving runs one random script. With stall, the informer's
// Reflector stops at the first object it reads until the watch's buffer is
// full.
func runInterleaving(t *testing.T, mode streamMode, rng *rand.Rand, stall bool) {
	slow := toolscache.Indexers{"slow": func(any) ([]string, error) {
		if rand.IntN(20) == 0 {
			time.Sleep(time.Millisecond)
		}
		return nil, nil
	}}
	lw := newScriptedLW(t, mode, listResponse{rv: "1"})
	// See startScripted for the snapshot limit. No quiet probes: the
	// scripted server's consistent reads stay at its list's resource
	// version while the script writes on, which a probe would rightly take
	// for a server behind the waits (too large resource version) while the
	// stalled reader holds the stream back.
	inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, slow, scriptOptions(WithQuietProbeDelay(-1))...)
	var w *watch.RaceFreeFakeWatcher // set before the first event is sent
	if stall {
		var once sync.Once
		// The transform runs on the Reflector's goroutine, as it reads.
		if err := inf.SetTransform(func(obj any) (any, error) {
			once.Do(func() {
				if !waitFull(w) {
					t.Error("the watch's buffer never filled while the Reflector stalled")
				}
			})
			return obj, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	stop := runInformer(t, inf)
	w = lw.nextWatcher()
	waitSynced(t, inf)

	// The script: RVs 2..n, each an event on one of a few keys or a bookmark.
	const n = 300
	var script []scriptedEvent
	live := map[string]bool{}
	for rv := uint64(2); rv <= n; rv++ {
		if rng.IntN(6) == 0 {
			script = append(script, scriptedEvent{rv: rv}) // bookmark
			continue
		}
		key := fmt.Sprintf("k%d", rng.IntN(8))
		del := live[key] && rng.IntN(4) == 0
		live[key] = !del
		script = append(script, scriptedEvent{rv: rv, key: key, deleted: del})
	}

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 16 {
		target := 2 + rng.Uint64N(n-1)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := inf.WaitForFreshness(ctx, strconv.FormatUint(target, 10)); err != nil {
				errs <- err
				return
			}
			if err := checkFreshAt(inf, script, target); err != nil {
				errs <- err
			}
		})
	}

	present := map[string]bool{}
	for _, e := range script {
		rv := strconv.FormatUint(e.rv, 10)
		waitRoom(t, w)
		switch {
		case e.key == "":
			w.Action(watch.Bookmark, bookmark(rv))
		case e.deleted:
			w.Delete(cm(e.key, rv))
			present[e.key] = false
		case present[e.key]:
			w.Modify(cm(e.key, rv))
		default:
			w.Add(cm(e.key, rv))
			present[e.key] = true
		}
		if rng.IntN(10) == 0 {
			time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	stop()
}

// waitRoom waits until w can take one more event: a RaceFreeFakeWatcher
// holds 100 and panics when full, and the informer reading it may fall that
// far behind (its Reflector starved on a loaded machine, say). Only the
// caller sends on w.
func waitRoom(t *testing.T, w *watch.RaceFreeFakeWatcher) {
	t.Helper()
	ch := w.ResultChan()
	for deadline := time.Now().Add(10 * time.Second); len(ch) == cap(ch); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatal("the informer read nothing from its watch for 10s")
		}
	}
}

// waitFull waits (10 s at most) until w's buffer is full.
func waitFull(w *watch.RaceFreeFakeWatcher) bool {
	ch := w.ResultChan()
	for deadline := time.Now().Add(10 * time.Second); len(ch) < cap(ch); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// checkFreshAt verifies that the indexer reflects every scripted event at or
// below target: each key holds the state of its last such event or a newer one.
func checkFreshAt(inf *FreshInformer, script []scriptedEvent, target uint64) error {
	last := map[string]scriptedEvent{}
	for _, e := range script {
		if e.rv > target {
			break
		}
		if e.key != "" {
			last[e.key] = e
		}
	}
	for key, e := range last {
		got := cached(inf, key)
		if got == "" {
			if e.deleted {
				continue
			}
			// Deleted again by a later event is fine; missing otherwise is not.
			if deletedAfter(script, key, e.rv) {
				continue
			}
			return fmt.Errorf("fresh at %d but %s (written at %d) is missing", target, key, e.rv)
		}
		n, _ := strconv.ParseUint(got, 10, 64)
		if n < e.rv {
			return fmt.Errorf("fresh at %d but %s is cached at %d, older than its event at %d", target, key, n, e.rv)
		}
		if e.deleted && n <= e.rv {
			return fmt.Errorf("fresh at %d but %s, deleted at %d, is cached at %d", target, key, e.rv, n)
		}
	}
	return nil
}

func deletedAfter(script []scriptedEvent, key string, rv uint64) bool {
	for _, e := range script {
		if e.rv > rv && e.key == key && e.deleted {
			return true
		}
	}
	return false
}
