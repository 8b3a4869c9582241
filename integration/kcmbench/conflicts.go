package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
)

// The 409 classifier: every write to a ReplicaSet (the driver's spec
// changes, the controller's status writes) is recorded with its resource
// version; a status write refused with 409 Conflict sent some older
// resource version X, and the first write after X says why the
// controller's cache was behind: the driver's spec change not yet seen,
// or the controller's own earlier status write not yet seen (which a
// consistency store is meant to prevent).

type writer int

const (
	byDriver writer = iota
	byController
)

// rsWrite is a recorded write to a ReplicaSet (exported fields: a
// controller process reports its own in its ctlResult).
type rsWrite struct {
	Name string
	RV   int64
	By   writer
	At   time.Time
}

// conflictLog is one configuration's record of ReplicaSet writes and
// status conflicts.
type conflictLog struct {
	mu        sync.Mutex
	writes    []rsWrite
	conflicts []conflict
	// lastGet is the resource version a controller GET of each
	// ReplicaSet returned, to tell updateReplicaSetStatus's retry (a PUT
	// after its GET) from a write on the cache's copy.
	lastGet map[string]int64
	// cacheRV reads the controller's ReplicaSet informer's
	// LastStoreSyncResourceVersion at the time of a conflict.
	cacheRV func() string
}

type conflict struct {
	Name   string
	Sent   int64
	At     time.Time
	Retry  bool   // the PUT after updateReplicaSetStatus's GET
	Cached string // the RS informer's applied RV then
}

func newConflictLog() *conflictLog {
	return &conflictLog{lastGet: map[string]int64{}}
}

func parseRV(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func (l *conflictLog) wrote(name string, by writer, rs *appsv1.ReplicaSet) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, rsWrite{Name: name, RV: parseRV(rs.ResourceVersion), By: by, At: time.Now()})
}

// add merges another process's records (the controller's) into l.
func (l *conflictLog) add(writes []rsWrite, conflicts []conflict) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, writes...)
	l.conflicts = append(l.conflicts, conflicts...)
}

// records returns copies of what l holds.
func (l *conflictLog) records() ([]rsWrite, []conflict) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]rsWrite(nil), l.writes...), append([]conflict(nil), l.conflicts...)
}

// createdAtLocked returns the resource version of the ReplicaSet's
// creation (the driver's first write of it).
func (l *conflictLog) createdAtLocked(name string) int64 {
	var rv int64
	for _, w := range l.writes {
		if w.Name == name && w.By == byDriver && (rv == 0 || w.RV < rv) {
			rv = w.RV
		}
	}
	return rv
}

// classes of conflicts, in the order printed.
const (
	classDriverSpec        = "driver's spec change not yet in the cache"
	classDriverSpecCreated = "driver's spec change not yet in the cache, on the created copy"
	classOwnStatus         = "own status write not yet in the cache"
	classRetry             = "retry after GET lost a race"
	classUnknown           = "no write found after the sent RV"
)

// summary classifies the conflicts: for each, the first write after the
// resource version sent, and how long before the conflict it was made.
func (l *conflictLog) summary() (counts map[string]int, ages map[string][]time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	counts, ages = map[string]int{}, map[string][]time.Duration{}
	for _, c := range l.conflicts {
		class := classUnknown
		var first *rsWrite
		for i := range l.writes {
			w := &l.writes[i]
			if w.Name == c.Name && w.RV > c.Sent && (first == nil || w.RV < first.RV) {
				first = w
			}
		}
		switch {
		case c.Retry:
			class = classRetry
		case first == nil:
		case first.By == byDriver && l.createdAtLocked(c.Name) == c.Sent:
			class = classDriverSpecCreated
		case first.By == byDriver:
			class = classDriverSpec
		default:
			class = classOwnStatus
		}
		counts[class]++
		if first != nil {
			ages[class] = append(ages[class], c.At.Sub(first.At))
		}
	}
	return counts, ages
}

func (l *conflictLog) String() string {
	counts, ages := l.summary()
	if len(counts) == 0 {
		return "none"
	}
	var classes []string
	for c := range counts {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	s := ""
	for _, c := range classes {
		if s != "" {
			s += "; "
		}
		s += fmt.Sprintf("%s: %d", c, counts[c])
		if a := ages[c]; len(a) > 0 {
			s += fmt.Sprintf(" (made %s / %s ms before the 409, p50 / max)", ms(pct(a, 50)), ms(pct(a, 100)))
		}
	}
	return s
}

// recordingClient is the controller's clientset with its ReplicaSet
// status writes and GETs recorded in a conflictLog.
type recordingClient struct {
	kubernetes.Interface
	log *conflictLog
}

func (c recordingClient) AppsV1() appsv1client.AppsV1Interface {
	return recordingApps{AppsV1Interface: c.Interface.AppsV1(), log: c.log}
}

type recordingApps struct {
	appsv1client.AppsV1Interface
	log *conflictLog
}

func (a recordingApps) ReplicaSets(ns string) appsv1client.ReplicaSetInterface {
	return recordingRS{ReplicaSetInterface: a.AppsV1Interface.ReplicaSets(ns), log: a.log}
}

type recordingRS struct {
	appsv1client.ReplicaSetInterface
	log *conflictLog
}

func (r recordingRS) Get(ctx context.Context, name string, opts metav1.GetOptions) (*appsv1.ReplicaSet, error) {
	rs, err := r.ReplicaSetInterface.Get(ctx, name, opts)
	if err == nil {
		r.log.mu.Lock()
		r.log.lastGet[name] = parseRV(rs.ResourceVersion)
		r.log.mu.Unlock()
	}
	return rs, err
}

func (r recordingRS) UpdateStatus(ctx context.Context, rs *appsv1.ReplicaSet, opts metav1.UpdateOptions) (*appsv1.ReplicaSet, error) {
	sent := parseRV(rs.ResourceVersion)
	out, err := r.ReplicaSetInterface.UpdateStatus(ctx, rs, opts)
	if err == nil {
		r.log.wrote(rs.Name, byController, out)
		return out, nil
	}
	if apierrors.IsConflict(err) {
		var cached string
		if r.log.cacheRV != nil {
			cached = r.log.cacheRV()
		}
		r.log.mu.Lock()
		retry := r.log.lastGet[rs.Name] == sent
		r.log.conflicts = append(r.log.conflicts, conflict{Name: rs.Name, Sent: sent, At: time.Now(), Retry: retry, Cached: cached})
		r.log.mu.Unlock()
	}
	return out, err
}
