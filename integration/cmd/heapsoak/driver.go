package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// driver is the load: it creates owners at a steady rate, each under a
// name never used before, and deletes each one (and its children) after a
// short life. A fraction is deleted at once: half of those in the same
// breath as the create, before any reconcile could check freshness, half
// within 300ms, typically while the first reconcile is between its read
// and its writes. Its own state is bounded by the owners alive at once.
type driver struct {
	client   kubernetes.Interface // not recording: the load is not the controller
	ns       string
	rate     float64
	lifetime time.Duration
	early    float64
	maxSteps int
	rnd      *rand.Rand // run's goroutine only

	created, deleted, earlyDeleted, swept, errs, logged atomic.Int64
}

func newDriver(client kubernetes.Interface, ns string, rate float64, lifetime time.Duration, early float64, maxSteps int) *driver {
	return &driver{client: client, ns: ns, rate: rate, lifetime: lifetime, early: early, maxSteps: maxSteps,
		rnd: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 22))}
}

// deletion is an owner due to be deleted.
type deletion struct {
	name string
	due  time.Time
}

// run creates and deletes owners until ctx ends.
func (d *driver) run(ctx context.Context) {
	start := time.Now()
	var pending []deletion // at most about rate × lifetime long
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	seq := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// Creates due by now; a few per tick at most, so that a slow
		// server is not answered with a burst.
		for i := 0; i < 4 && ctx.Err() == nil && time.Since(start).Seconds()*d.rate >= float64(seq); i++ {
			name := fmt.Sprintf("owner-%07d", seq)
			seq++
			if !d.create(ctx, name) {
				continue
			}
			now := time.Now()
			switch r := d.rnd.Float64(); {
			case r < d.early/2:
				d.earlyDeleted.Add(1)
				d.remove(ctx, name)
			case r < d.early:
				d.earlyDeleted.Add(1)
				pending = append(pending, deletion{name, now.Add(time.Duration(d.rnd.Int64N(int64(300 * time.Millisecond))))})
			default:
				min := d.lifetime / 3
				pending = append(pending, deletion{name, now.Add(min + time.Duration(d.rnd.Int64N(int64(d.lifetime-min))))})
			}
		}
		now := time.Now()
		pending = slices.DeleteFunc(pending, func(p deletion) bool {
			if now.Before(p.due) || ctx.Err() != nil {
				return false
			}
			d.remove(ctx, p.name)
			return true
		})
	}
}

func (d *driver) create(ctx context.Context, name string) bool {
	_, err := d.client.CoreV1().ConfigMaps(d.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{labelApp: appValue, labelRole: roleOwner},
			Annotations: map[string]string{annTarget: strconv.Itoa(1 + d.rnd.IntN(d.maxSteps))}},
		Data: map[string]string{"payload": "owner"},
	}, metav1.CreateOptions{})
	if err != nil {
		d.failed(ctx, "creating owner "+name, err)
		return false
	}
	d.created.Add(1)
	return true
}

// remove deletes the owner and its children (no garbage collector runs in
// this control plane: the children go by label; one created after this
// is the janitor's).
func (d *driver) remove(ctx context.Context, name string) {
	err := d.client.CoreV1().ConfigMaps(d.ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		d.failed(ctx, "deleting owner "+name, err)
	}
	d.deleted.Add(1)
	err = d.client.CoreV1().Secrets(d.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: labelOwner + "=" + name})
	if err != nil {
		d.failed(ctx, "deleting the children of "+name, err)
	}
}

// janitor deletes, every 10s, the soak's objects older than any owner
// lives: children a reconcile created after the driver deleted their owner
// (its writes raced the delete), and anything a failed delete left.
// Without it the cluster, and so the informers' caches, would grow.
func (d *driver) janitor(ctx context.Context) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cutoff := time.Now().Add(-d.lifetime - 15*time.Second)
		sel := metav1.ListOptions{LabelSelector: labelApp + "=" + appValue}
		if l, err := d.client.CoreV1().Secrets(d.ns).List(ctx, sel); err != nil {
			d.failed(ctx, "listing children", err)
		} else {
			for _, s := range l.Items {
				if s.CreationTimestamp.Time.Before(cutoff) {
					d.sweep(ctx, d.client.CoreV1().Secrets(d.ns).Delete(ctx, s.Name, metav1.DeleteOptions{}), s.Name)
				}
			}
		}
		if l, err := d.client.CoreV1().ConfigMaps(d.ns).List(ctx, sel); err != nil {
			d.failed(ctx, "listing owners", err)
		} else {
			for _, cm := range l.Items {
				if cm.CreationTimestamp.Time.Before(cutoff) {
					d.sweep(ctx, d.client.CoreV1().ConfigMaps(d.ns).Delete(ctx, cm.Name, metav1.DeleteOptions{}), cm.Name)
				}
			}
		}
	}
}

func (d *driver) sweep(ctx context.Context, err error, name string) {
	if err != nil && !apierrors.IsNotFound(err) {
		d.failed(ctx, "sweeping "+name, err)
		return
	}
	d.swept.Add(1)
}

func (d *driver) failed(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return // shutting down
	}
	d.errs.Add(1)
	if d.logged.Add(1) <= maxLogLines {
		logf("load: %s: %v", what, err)
	}
}
