package readyourwrites

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
)

// quietLW lists nothing at a resource version and watches in silence.
type quietLW struct {
	rv   string
	list apiruntime.Object
}

func (lw quietLW) List(metav1.ListOptions) (apiruntime.Object, error) {
	l := lw.list.DeepCopyObject()
	l.(metav1.ListInterface).SetResourceVersion(lw.rv)
	return l, nil
}
func (lw quietLW) Watch(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil }
func (lw quietLW) IsWatchListSemanticsUnSupported() bool             { return true }

// A write of an events.k8s.io Event is waited for on the events.k8s.io
// informer, not on the core one whose Go type prints the same (*v1.Event):
// CheckFresh says the written informer is behind, where routing by the
// printed type found the core informer, already past the write, and said
// fresh.
func TestSamePrintedTypesRouteToTheirOwnInformer(t *testing.T) {
	core := cache.NewSharedIndexInformer(quietLW{"100", &corev1.EventList{}}, &corev1.Event{}, 0, toolscache.Indexers{})
	events := cache.NewSharedIndexInformer(quietLW{"5", &eventsv1.EventList{}}, &eventsv1.Event{}, 0, toolscache.Indexers{})
	runInformer(t, core)
	runInformer(t, events)
	waitSynced(t, core)
	waitSynced(t, events)
	ryw := New(cache.Sources{cache.InformerList{core}, cache.InformerList{events}}, 5*time.Second)

	o := owner("p", "1")
	written := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e", ResourceVersion: "10", UID: "u"}}
	if err := ryw.Wrote(o, written, nil); err != nil {
		t.Fatal(err)
	}
	var nf *NotFreshError
	if err := ryw.CheckFresh(o); !errors.As(err, &nf) || nf.Informer != events {
		t.Fatalf("CheckFresh after an events.k8s.io write its informer has not seen = %v; want the events.k8s.io informer behind", err)
	}
	deleted := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: "20", UID: "v"}}
	o2 := owner("q", "2")
	if err := ryw.Deleted(o2, deleted, nil); err != nil {
		t.Fatal(err)
	}
	if err := ryw.CheckFresh(o2); err != nil {
		t.Fatalf("CheckFresh after deleting a core Event the core informer never held = %v", err)
	}
}
