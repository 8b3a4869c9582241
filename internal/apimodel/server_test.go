package apimodel

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// populate writes: a@2, b@3, c@4, a@5 (update), b@6 (delete).
func populate(t *testing.T, s *Server) {
	t.Helper()
	for _, step := range []func() (uint64, error){
		func() (uint64, error) { return s.Create("a", "1") },
		func() (uint64, error) { return s.Create("b", "1") },
		func() (uint64, error) { return s.Create("c", "1") },
		func() (uint64, error) { return s.Update("a", "2") },
		func() (uint64, error) { return s.Delete("b") },
	} {
		if _, err := step(); err != nil {
			t.Fatal(err)
		}
	}
}

func list(t *testing.T, s *Server, o metav1.ListOptions) *corev1.ConfigMapList {
	t.Helper()
	obj, err := s.List(o)
	if err != nil {
		t.Fatalf("list %+v: %v", o, err)
	}
	return obj.(*corev1.ConfigMapList)
}

func names(l *corev1.ConfigMapList) string {
	out := ""
	for _, it := range l.Items {
		out += fmt.Sprintf("%s@%s ", it.Name, it.ResourceVersion)
	}
	return out
}

func TestListSemantics(t *testing.T) {
	s := New(Options{Seed: 1, Replicas: 1, PageSize: 2})
	defer s.Close()
	populate(t, s)

	if l := list(t, s, metav1.ListOptions{}); l.ResourceVersion != "6" || names(l) != "a@5 c@4 " {
		t.Fatalf("most recent: rv %s items %s", l.ResourceVersion, names(l))
	}
	// Exact at 3: a@2 b@3.
	if l := list(t, s, metav1.ListOptions{ResourceVersion: "3", ResourceVersionMatch: metav1.ResourceVersionMatchExact}); l.ResourceVersion != "3" || names(l) != "a@2 b@3 " {
		t.Fatalf("exact 3: rv %s items %s", l.ResourceVersion, names(l))
	}
	// A frozen replica answers Any and NotOlderThan from its cache, and
	// "Too large resource version" beyond it.
	s.Freeze(0)
	if _, err := s.Create("d", "1"); err != nil {
		t.Fatal(err)
	}
	if l := list(t, s, metav1.ListOptions{ResourceVersion: "0"}); l.ResourceVersion != "6" {
		t.Fatalf("any from a frozen replica: rv %s", l.ResourceVersion)
	}
	if l := list(t, s, metav1.ListOptions{ResourceVersion: "4", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}); l.ResourceVersion != "6" {
		t.Fatalf("not older than 4 from a replica at 6: rv %s", l.ResourceVersion)
	}
	_, err := s.List(metav1.ListOptions{ResourceVersion: "7", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		t.Fatalf("not older than 7 from a replica at 6: %v", err)
	}
	s.Thaw(0)
	if l := list(t, s, metav1.ListOptions{ResourceVersion: "7", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}); l.ResourceVersion != "7" {
		t.Fatalf("after thaw: rv %s", l.ResourceVersion)
	}

	// Pagination keeps the first page's revision, even across writes.
	first := list(t, s, metav1.ListOptions{Limit: 500})
	if len(first.Items) != 2 || first.Continue == "" || first.ResourceVersion != "7" {
		t.Fatalf("first page: %s continue %q rv %s", names(first), first.Continue, first.ResourceVersion)
	}
	if _, err := s.Update("d", "2"); err != nil {
		t.Fatal(err)
	}
	second := list(t, s, metav1.ListOptions{Limit: 500, Continue: first.Continue})
	if names(second) != "d@7 " || second.Continue != "" || second.ResourceVersion != "7" {
		t.Fatalf("second page: %s continue %q rv %s", names(second), second.Continue, second.ResourceVersion)
	}
	// Compaction expires continue tokens and exact reads below it.
	s.Compact(8)
	if _, err := s.List(metav1.ListOptions{Limit: 500, Continue: first.Continue}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("continue after compaction: %v", err)
	}
	if _, err := s.List(metav1.ListOptions{ResourceVersion: "3", ResourceVersionMatch: metav1.ResourceVersionMatchExact}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("exact below compaction: %v", err)
	}
	// Invalid combinations are 400.
	for _, o := range []metav1.ListOptions{
		{ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
		{ResourceVersion: "0", ResourceVersionMatch: metav1.ResourceVersionMatchExact},
		{ResourceVersion: "x1"},
		{ResourceVersion: "3", Continue: first.Continue},
	} {
		if _, err := s.List(o); !apierrors.IsBadRequest(err) {
			t.Fatalf("list %+v: %v, want 400", o, err)
		}
	}
}

func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("stream ended")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
		return watch.Event{}
	}
}

func describe(ev watch.Event) string {
	if ev.Type == watch.Error {
		return "ERROR " + apierrors.FromObject(ev.Object).Error()
	}
	m, _ := ev.Object.(metav1.Object)
	s := fmt.Sprintf("%s %s@%s", ev.Type, m.GetName(), m.GetResourceVersion())
	if m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
		s += " end"
	}
	return s
}

func ended(t *testing.T, w watch.Interface) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("want the end of the stream, got %s", describe(ev))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stream did not end")
	}
}

func TestWatchSemantics(t *testing.T) {
	s := New(Options{Seed: 1, Replicas: 1})
	defer s.Close()
	populate(t, s)

	// Start at Exact: the events after 3.
	w, err := s.Watch(metav1.ListOptions{ResourceVersion: "3"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ADDED c@4", "MODIFIED a@5", "DELETED b@6"} {
		if got := describe(next(t, w)); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
	if _, err := s.Create("b", "new"); err != nil {
		t.Fatal(err)
	}
	ev := next(t, w)
	if describe(ev) != "ADDED b@7" || ev.Object.(*corev1.ConfigMap).UID == "uid-2" {
		t.Fatalf("recreated b: %s uid %s", describe(ev), ev.Object.(*corev1.ConfigMap).UID)
	}
	if st := s.Stats(); st.OpenWatches != 1 {
		t.Fatalf("open watches %d", st.OpenWatches)
	}
	w.Stop()
	ended(t, w)
	if st := s.Stats(); st.OpenWatches != 0 {
		t.Fatalf("open watches after Stop %d", st.OpenWatches)
	}

	// A watch-list: state in key order, the annotated bookmark, then events.
	w, err = s.Watch(metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ADDED a@5", "ADDED b@7", "ADDED c@4", "BOOKMARK @7 end"} {
		if got := describe(next(t, w)); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
	if _, err := s.Delete("c"); err != nil {
		t.Fatal(err)
	}
	if got := describe(next(t, w)); got != "DELETED c@8" {
		t.Fatal(got)
	}
	// Compaction: a watch from below it is 410 Gone (as an error or as the
	// first event); the server ending the stream with 410 in-stream.
	s.Compact(8)
	w2, err := s.Watch(metav1.ListOptions{ResourceVersion: "5"})
	if err == nil {
		if ev := next(t, w2); ev.Type != watch.Error || !apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) {
			t.Fatalf("watch below compaction: %s", describe(ev))
		}
		ended(t, w2)
		w2.Stop()
	} else if !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch below compaction: %v", err)
	}
	s.GoneWatches()
	if ev := next(t, w); ev.Type != watch.Error {
		t.Fatalf("after GoneWatches: %s", describe(ev))
	}
	ended(t, w)
	w.Stop()
	// A watch from the future starts (kube-apiserver's watch cache only
	// makes a watch-list wait); one from beyond any revision is too large.
	if w, err := s.Watch(metav1.ListOptions{ResourceVersion: "100"}); err != nil {
		t.Fatalf("watch from the future: %v", err)
	} else {
		w.Stop()
	}
	if _, err := s.Watch(metav1.ListOptions{ResourceVersion: FarFutureRV}); !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		t.Fatalf("watch from beyond any revision: %v", err)
	}
	// A watch-list requires bookmarks and NotOlderThan.
	if _, err := s.Watch(metav1.ListOptions{SendInitialEvents: ptr.To(true)}); !apierrors.IsBadRequest(err) {
		t.Fatalf("watch-list without bookmarks: %v", err)
	}
	// The stream ends with its context, as an HTTP stream would.
	ctx, cancel := context.WithCancel(context.Background())
	w3, err := s.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "8"})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	ended(t, w3)
	w3.Stop()
	if st := s.Stats(); st.OpenWatches != 0 || st.LiveStreams != 0 {
		t.Fatalf("open watches %d, live streams %d", st.OpenWatches, st.LiveStreams)
	}
}

func TestStreamFaults(t *testing.T) {
	s := New(Options{Seed: 1, Replicas: 1})
	defer s.Close()
	populate(t, s)
	w, err := s.Watch(metav1.ListOptions{ResourceVersion: "6", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	s.SetFaults(Faults{Duplicate: 1, Malformed: 1})
	if _, err := s.Create("x", "1"); err != nil {
		t.Fatal(err)
	}
	a, b := next(t, w), next(t, w)
	if describe(a) != "ADDED x@m7" || describe(b) != "ADDED x@m7" {
		t.Fatalf("duplicate malformed: %s, %s", describe(a), describe(b))
	}
	if v := VersionOf(a.Object.(*corev1.ConfigMap)); v.Rev != 7 {
		t.Fatalf("true revision of a mangled object: %v", v)
	}
	s.SetFaults(Faults{Replay: 1, FarFutureBookmark: 1})
	if _, err := s.Update("x", "2"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"MODIFIED x@8", "ADDED x@7", "BOOKMARK @" + FarFutureRV} {
		if got := describe(next(t, w)); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
	s.SetFaults(Faults{OlderBookmark: 1, Close: 1})
	if _, err := s.Update("x", "3"); err != nil {
		t.Fatal(err)
	}
	if got := describe(next(t, w)); got != "MODIFIED x@9" {
		t.Fatal(got)
	}
	if ev := next(t, w); ev.Type != watch.Bookmark || ev.Object.(*corev1.ConfigMap).ResourceVersion >= "9" {
		t.Fatalf("older bookmark: %s", describe(ev))
	}
	ended(t, w)
	// The server takes a mangled resource version back.
	s.SetFaults(Faults{})
	if _, err := s.List(metav1.ListOptions{ResourceVersion: "m7", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}); err != nil {
		t.Fatal(err)
	}
	s.SetFaults(Faults{ListError: 1, WatchError: 1})
	if _, err := s.List(metav1.ListOptions{}); err == nil {
		t.Fatal("list error fault: no error")
	}
	if _, err := s.Watch(metav1.ListOptions{}); err == nil {
		t.Fatal("watch error fault: no error")
	}
}

func TestRestore(t *testing.T) {
	s := New(Options{Seed: 1, Replicas: 1})
	defer s.Close()
	populate(t, s) // a@5 c@4 at 6
	w, err := s.Watch(metav1.ListOptions{ResourceVersion: "6"})
	if err != nil {
		t.Fatal(err)
	}
	s.Restore(3, 1000) // a@2 b@3, revision 1006, compacted
	ended(t, w)
	w.Stop()
	if l := list(t, s, metav1.ListOptions{}); l.ResourceVersion != "1006" || names(l) != "a@2 b@3 " {
		t.Fatalf("after a bumped restore: rv %s items %s", l.ResourceVersion, names(l))
	}
	if _, err := s.Watch(metav1.ListOptions{ResourceVersion: "6"}); err == nil {
		// Gone in-stream is fine too; drain it.
	} else if !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch from before a bumped restore: %v", err)
	}
	rev, _ := s.Update("a", "x")
	if rev != 1007 || s.Epoch() != 1 {
		t.Fatalf("write after restore at %d, epoch %d", rev, s.Epoch())
	}

	s.Restore(1006, 0) // back to a@2 b@3 at 1006: revisions are reused
	rev, _ = s.Update("b", "y")
	if rev != 1007 {
		t.Fatalf("write after an unbumped restore at %d", rev)
	}
	got := s.StatesSince("a", 1007)
	if len(got) != 1 || got[0].Rev != 2 {
		t.Fatalf("a since 1007 in the new timeline: %v", got)
	}
	for e, want := range map[int]Restoration{1: {Epoch: 1, Rev: 1006, Bumped: true}, 2: {Epoch: 2, Rev: 1006}} {
		if got, ok := s.RestorationOf(e); !ok || got != want {
			t.Errorf("RestorationOf(%d) = %+v, %v; want %+v", e, got, ok, want)
		}
	}
	if _, ok := s.RestorationOf(0); ok {
		t.Error("RestorationOf(0) found a restore before any")
	}
	if _, ok := s.RestorationOf(3); ok {
		t.Error("RestorationOf(3) found a restore that did not happen")
	}
	// A watch from beyond the restored revision starts, as kube-apiserver's
	// does, and is silent (no event, no bookmark) until the server passes it.
	w, err = s.Watch(metav1.ListOptions{ResourceVersion: "1008", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatalf("watch from beyond: %v", err)
	}
	defer w.Stop()
	s.Bookmark()
	if _, err := s.Update("a", "z"); err != nil { // 1008: not after the watch's revision
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		t.Fatalf("a watch from beyond the server's revision got %s before the server passed it", describe(ev))
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := s.Update("b", "z"); err != nil { // 1009
		t.Fatal(err)
	}
	if got := describe(next(t, w)); got != "MODIFIED b@1009" {
		t.Fatalf("a watch from 1008 after the server passed it: %s", got)
	}
}

func TestStaleProxy(t *testing.T) {
	s := New(Options{Seed: 1})
	defer s.Close()
	populate(t, s)
	s.StartStaleProxy(3)
	if l := list(t, s, metav1.ListOptions{ResourceVersion: "6", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}); l.ResourceVersion != "3" {
		t.Fatalf("stale proxy list at %s", l.ResourceVersion)
	}
	s.StopStaleProxy()
	if l := list(t, s, metav1.ListOptions{ResourceVersion: "6", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}); l.ResourceVersion != "6" {
		t.Fatalf("after the proxy: %s", l.ResourceVersion)
	}
}

// TestClientGoReflector runs client-go's own Reflector (list+watch, with
// pagination and relists) against the model through faults and checks that
// its store ends at the model's state.
func TestClientGoReflector(t *testing.T) {
	s := New(Options{Seed: 7, PageSize: 3})
	for i := range 10 {
		if _, err := s.Create(fmt.Sprintf("k%d", i), "0"); err != nil {
			t.Fatal(err)
		}
	}
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	r := toolscache.NewReflector(s, &corev1.ConfigMap{}, store, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.RunWithContext(ctx) }()
	defer func() { cancel(); <-done; s.Close() }()

	s.SetFaults(Faults{Close: 0.05, Bookmark: 0.2})
	for i := range 200 {
		name := fmt.Sprintf("k%d", i%10)
		if _, err := s.Update(name, fmt.Sprint(i)); apierrors.IsNotFound(err) {
			if _, err := s.Create(name, fmt.Sprint(i)); err != nil {
				t.Fatal(err)
			}
		}
		if i%7 == 0 {
			_, _ = s.Delete(fmt.Sprintf("k%d", (i+3)%10))
		}
		if i == 100 {
			// A relist (quorum read, paginated): with faults paused, an
			// open watch gets the 410, whatever the Close faults did.
			s.SetFaults(Faults{})
			for until := time.Now().Add(10 * time.Second); s.Stats().OpenWatches == 0 && time.Now().Before(until); {
				time.Sleep(time.Millisecond)
			}
			s.Compact(s.Rev())
			s.GoneWatches()
			s.SetFaults(Faults{Close: 0.05, Bookmark: 0.2})
		}
	}
	s.SetFaults(Faults{})
	deadline := time.Now().Add(20 * time.Second)
	for {
		want := s.State()
		got := map[string]Version{}
		for _, obj := range store.List() {
			c := obj.(*corev1.ConfigMap)
			got[c.Name] = VersionOf(c)
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reflector's store %v, model %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := s.Stats(); st.Lists+st.WatchLists < 2 || st.Watches < 2 { // watch-list is client-go's default
		t.Fatalf("expected a relist and several watches: %+v", st)
	}
}

// TestWriteElsewhere: a revision committed on another resource bumps the
// revision lists report and that bookmarks may carry, with no event and no
// object; a frozen replica reaches it only when thawed; a down server
// refuses it.
func TestWriteElsewhere(t *testing.T) {
	s := New(Options{Seed: 1, Replicas: 1, TooLargeWait: 20 * time.Millisecond})
	defer s.Close()
	populate(t, s) // a@5 c@4, at 6
	w, err := s.Watch(metav1.ListOptions{ResourceVersion: "6", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rev, err := s.WriteElsewhere()
	if err != nil || rev != 7 {
		t.Fatalf("WriteElsewhere = %d, %v; want 7", rev, err)
	}
	if s.Rev() != 7 || s.Stats().ElsewhereWrites != 1 {
		t.Fatalf("rev %d, stats %+v", s.Rev(), s.Stats())
	}
	// Lists report the new revision over the same items.
	if l := list(t, s, metav1.ListOptions{}); l.ResourceVersion != "7" || names(l) != "a@5 c@4 " {
		t.Fatalf("most recent: rv %s items %s", l.ResourceVersion, names(l))
	}
	if l := list(t, s, metav1.ListOptions{ResourceVersion: "7", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}); l.ResourceVersion != "7" || names(l) != "a@5 c@4 " {
		t.Fatalf("not older than 7: rv %s items %s", l.ResourceVersion, names(l))
	}
	if l := list(t, s, metav1.ListOptions{ResourceVersion: "7", ResourceVersionMatch: metav1.ResourceVersionMatchExact}); l.ResourceVersion != "7" || names(l) != "a@5 c@4 " {
		t.Fatalf("exact 7: rv %s items %s", l.ResourceVersion, names(l))
	}
	// No event: the next thing the stream sends is a bookmark at 7, then
	// the next write's event.
	s.Bookmark()
	if got := describe(next(t, w)); got != "BOOKMARK @7" {
		t.Fatalf("after WriteElsewhere and Bookmark: %s", got)
	}
	if _, err := s.Update("c", "2"); err != nil {
		t.Fatal(err)
	}
	if got := describe(next(t, w)); got != "MODIFIED c@8" {
		t.Fatalf("next event: %s", got)
	}
	// A watch from the revision committed elsewhere starts there.
	w2, err := s.Watch(metav1.ListOptions{ResourceVersion: "7"})
	if err != nil {
		t.Fatal(err)
	}
	if got := describe(next(t, w2)); got != "MODIFIED c@8" {
		t.Fatalf("watch from 7: %s", got)
	}
	w2.Stop()
	// A watch-list's initial-events-end bookmark carries it.
	if _, err := s.WriteElsewhere(); err != nil { // 9
		t.Fatal(err)
	}
	w3, err := s.Watch(metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ADDED a@5", "ADDED c@8", "BOOKMARK @9 end"} {
		if got := describe(next(t, w3)); got != want {
			t.Fatalf("watch-list: got %s, want %s", got, want)
		}
	}
	w3.Stop()
	// A frozen replica's watch cache does not reach it until thawed: a
	// NotOlderThan list for it is "too large", and its streams' bookmarks
	// stay behind.
	s.Freeze(0)
	if _, err := s.WriteElsewhere(); err != nil { // 10
		t.Fatal(err)
	}
	if _, err := s.List(metav1.ListOptions{ResourceVersion: "10", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}); !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		t.Fatalf("not older than 10 on a frozen replica: %v", err)
	}
	s.Bookmark()
	if got := describe(next(t, w)); got != "BOOKMARK @9" {
		t.Fatalf("bookmark from a frozen replica: %s", got)
	}
	// A list waiting for the revision is answered once the replica thaws.
	done := make(chan string)
	go func() {
		obj, err := s.List(metav1.ListOptions{ResourceVersion: "10", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if err != nil {
			done <- err.Error()
			return
		}
		done <- obj.(*corev1.ConfigMapList).ResourceVersion
	}()
	s.Thaw(0)
	if got := <-done; got != "10" {
		t.Fatalf("not older than 10 after the thaw: %s", got)
	}
	s.Bookmark()
	if got := describe(next(t, w)); got != "BOOKMARK @10" {
		t.Fatalf("bookmark after the thaw: %s", got)
	}
	// Down: refused, the revision stays.
	s.SetDown(true)
	if _, err := s.WriteElsewhere(); err == nil || s.Rev() != 10 {
		t.Fatalf("WriteElsewhere while down: %v, rev %d", err, s.Rev())
	}
}
