package writes

import (
	"context"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/stalereads"
)

type staleReports struct {
	mu  sync.Mutex
	got []stalereads.Report
}

func (s *staleReports) add(r stalereads.Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, r)
}

func (s *staleReports) take() []stalereads.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.got
	s.got = nil
	return g
}

// Updates and patches carrying a resource version older than the one this
// transport recorded for the object (42, apiServer's) are reported, in
// JSON and protobuf, and reach the server unchanged; those at it, without
// one, or of other objects are not.
func TestStaleWritesReported(t *testing.T) {
	for _, ct := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		t.Run(ct, func(t *testing.T) {
			t.Setenv(stalereads.EnvVar, "")
			srv := apiServer(t)
			var bodies []string
			var mu sync.Mutex
			capture := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if req.Body != nil {
					b, _ := io.ReadAll(req.Body)
					req.Body = io.NopCloser(strings.NewReader(string(b)))
					mu.Lock()
					bodies = append(bodies, string(b))
					mu.Unlock()
				}
				return srv.Client().Transport.RoundTrip(req)
			})
			reports := &staleReports{}
			cfg := &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: ct}}
			cfg.Wrap(func(http.RoundTripper) http.RoundTripper {
				return NewRoundTripper(capture, &fakeRecorder{}, WithStaleWriteDetection(reports.add))
			})
			client := kubernetes.NewForConfigOrDie(cfg)
			ctx := WithOwner(context.Background(), theOwner)
			cms := client.CoreV1().ConfigMaps("ns")

			at := func(rv string) *corev1.ConfigMap {
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", ResourceVersion: rv}}
			}
			if _, err := cms.Update(ctx, at("41"), metav1.UpdateOptions{}); err != nil { // nothing recorded yet
				t.Fatal(err)
			}
			if got := reports.take(); len(got) != 0 {
				t.Fatalf("reported before any write was recorded: %v", got)
			}
			// The update above was recorded at 42 (apiServer's answer).
			for _, ok := range []func() error{
				func() error { _, err := cms.Update(ctx, at("42"), metav1.UpdateOptions{}); return err },
				func() error { _, err := cms.Update(ctx, at(""), metav1.UpdateOptions{}); return err },
				func() error {
					_, err := client.CoreV1().ConfigMaps("other").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", ResourceVersion: "1"}}, metav1.UpdateOptions{})
					return err
				},
				func() error {
					_, err := cms.Patch(ctx, "cm", types.MergePatchType, []byte(`{"data":{"k":"v"}}`), metav1.PatchOptions{})
					return err
				},
			} {
				if err := ok(); err != nil {
					t.Fatal(err)
				}
			}
			if got := reports.take(); len(got) != 0 {
				t.Fatalf("reported writes that are not stale: %v", got)
			}
			mu.Lock()
			bodies = nil
			mu.Unlock()

			stale := []struct {
				op    string
				write func() error
			}{
				{"update", func() error { _, err := cms.Update(ctx, at("41"), metav1.UpdateOptions{}); return err }},
				{"update", func() error { _, err := cms.Update(context.Background(), at("41"), metav1.UpdateOptions{}); return err }}, // no owner: checked still
				{"patch", func() error {
					_, err := cms.Patch(ctx, "cm", types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"41"}}`), metav1.PatchOptions{})
					return err
				}},
				{"patch", func() error {
					_, err := cms.Patch(ctx, "cm", types.StrategicMergePatchType, []byte(`{"metadata":{"resourceVersion":"40"}}`), metav1.PatchOptions{})
					return err
				}},
				{"patch", func() error {
					_, err := cms.Patch(ctx, "cm", types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/resourceVersion","value":"41"},{"op":"add","path":"/data","value":{}}]`), metav1.PatchOptions{})
					return err
				}},
				{"patch", func() error {
					_, err := cms.Apply(ctx, applycorev1.ConfigMap("cm", "ns").WithResourceVersion("41"), metav1.ApplyOptions{FieldManager: "t"})
					return err
				}},
			}
			for i, s := range stale {
				if err := s.write(); err != nil {
					t.Fatal(err)
				}
				got := reports.take()
				if len(got) != 1 || got[0].Kind != stalereads.WriteOlder || got[0].Op != s.op || got[0].Key != "ns/cm" || got[0].WrittenResourceVersion != "42" || got[0].Resource != cmGR {
					t.Errorf("stale write %d: %+v", i, got)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(bodies) != len(stale) || !strings.Contains(bodies[2], `"resourceVersion":"41"`) {
				t.Errorf("bodies the server got: %q", bodies)
			}
		})
	}
}

// Off by default: nothing is checked, and the body is not read.
func TestStaleWritesOffByDefault(t *testing.T) {
	t.Setenv(stalereads.EnvVar, "")
	rt := NewRoundTripper(jsonTransport(), &fakeRecorder{}).(*roundTripper)
	if rt.stale != nil {
		t.Fatal("detector on without the option or the environment variable")
	}
	t.Setenv(stalereads.EnvVar, "stalereads=1")
	if rt := NewRoundTripper(jsonTransport(), &fakeRecorder{}).(*roundTripper); rt.stale == nil {
		t.Fatal("FRESHINFORMER_DEBUG=stalereads=1 did not turn it on")
	}
}

// staleCounter is a StaleWriteCounter that remembers its counts.
type staleCounter struct {
	mu  sync.Mutex
	got map[schema.GroupResource]int
}

func (c *staleCounter) AddStaleWrites(gr schema.GroupResource, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.got == nil {
		c.got = map[schema.GroupResource]int{}
	}
	c.got[gr] += n
}

func (c *staleCounter) counts() map[schema.GroupResource]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.got)
}

// A transport counts its stale writes on its own counter (from 0 at the
// first recorded write), logs through the request's logger, and says once
// that it is on; a handler takes the log's place unless
// WithStaleWriteLogging asks for both.
func TestStaleWritesCountedAndLogged(t *testing.T) {
	t.Setenv(stalereads.EnvVar, "")
	for _, c := range []struct {
		name             string
		handler, alsoLog bool
		wantLines        int // the line saying it is on, and the report
	}{
		{"no handler", false, false, 2},
		{"handler", true, false, 0},
		{"handler, also logged", true, true, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := apiServer(t)
			var mu sync.Mutex
			var lines []string
			logger := funcr.New(func(_, args string) { mu.Lock(); defer mu.Unlock(); lines = append(lines, args) }, funcr.Options{})
			counter, other := &staleCounter{}, &staleCounter{}
			reports := &staleReports{}
			opts := []Option{WithStaleWriteCounter(counter)}
			if c.handler {
				opts = append(opts, WithStaleWriteDetection(reports.add))
			} else {
				opts = append(opts, WithStaleWriteDetection(nil))
			}
			if c.alsoLog {
				opts = append(opts, WithStaleWriteLogging())
			}
			cfg := &rest.Config{Host: srv.URL}
			cfg.Wrap(func(http.RoundTripper) http.RoundTripper {
				return NewRoundTripper(srv.Client().Transport, &fakeRecorder{}, opts...)
			})
			// Another transport, counting elsewhere, writes too.
			otherCfg := WrapConfig(&rest.Config{Host: srv.URL, Transport: srv.Client().Transport}, &fakeRecorder{}, WithStaleWriteCounter(other), WithStaleWriteDetection(func(stalereads.Report) {}))
			ctx := klog.NewContext(WithOwner(context.Background(), theOwner), logger)
			cms := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps("ns")
			at := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", ResourceVersion: "41"}}
			if _, err := cms.Update(ctx, at, metav1.UpdateOptions{}); err != nil { // recorded at 42
				t.Fatal(err)
			}
			if got := counter.counts(); len(got) != 1 || got[cmGR] != 0 {
				t.Fatalf("counts after the first write: %v, want configmaps at 0", got)
			}
			if _, err := cms.Update(ctx, at, metav1.UpdateOptions{}); err != nil { // stale: 41 < 42
				t.Fatal(err)
			}
			if _, err := kubernetes.NewForConfigOrDie(otherCfg).CoreV1().ConfigMaps("ns").Update(ctx, at, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := counter.counts(); got[cmGR] != 1 {
				t.Errorf("counted %v, want 1 stale write of configmaps", got)
			}
			if got := other.counts(); got[cmGR] != 0 {
				t.Errorf("the other transport counted %v, want none", got)
			}
			if c.handler && len(reports.take()) != 1 {
				t.Errorf("the handler did not get the report")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(lines) != c.wantLines {
				t.Fatalf("logged %q, want %d lines", lines, c.wantLines)
			}
			if c.wantLines > 0 && (!strings.Contains(lines[0], "Stale-write detector on") || !strings.Contains(lines[1], "Stale write:")) {
				t.Errorf("logged %q", lines)
			}
		})
	}
}
