package writes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/freshinformer/freshinformer/internal/apipath"
	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// call is one Record or RecordDelete.
type call struct {
	delete bool
	owner  readyourwrites.Owner
	gr     schema.GroupResource
	ns     string
	name   string
	uid    types.UID
	rv     string
	labels map[string]string
}

type fakeRecorder struct {
	mu    sync.Mutex
	calls []call
	err   error
}

func (r *fakeRecorder) add(del bool, owner readyourwrites.Owner, gr schema.GroupResource, o metav1.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{del, owner, gr, o.GetNamespace(), o.GetName(), o.GetUID(), o.GetResourceVersion(), o.GetLabels()})
}

func (r *fakeRecorder) Record(owner readyourwrites.Owner, gr schema.GroupResource, o metav1.Object) error {
	r.add(false, owner, gr, o)
	return r.err
}

func (r *fakeRecorder) RecordDelete(owner readyourwrites.Owner, gr schema.GroupResource, o metav1.Object) error {
	r.add(true, owner, gr, o)
	return r.err
}

func (r *fakeRecorder) take() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

// apiServer answers like kube-apiserver, in JSON or protobuf as asked:
// a write returns the object at resource version 42; names steer the
// unusual answers.
func apiServer(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		tgt, _ := apipath.Parse(req.URL.Path)
		name := tgt.Name
		if name == "" {
			name = "created"
		}
		var obj runtime.Object
		var gv schema.GroupVersion
		status := http.StatusOK
		meta := metav1.ObjectMeta{Namespace: tgt.Namespace, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "42", Labels: map[string]string{"app": "x"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "test", Operation: metav1.ManagedFieldsOperationApply}}}
		switch {
		case name == "conflict":
			status, obj, gv = http.StatusConflict, &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonConflict, Code: 409}, metav1.SchemeGroupVersion
		case req.Method == http.MethodDelete && name == "status-only":
			obj, gv = &metav1.Status{Status: metav1.StatusSuccess, Details: &metav1.StatusDetails{Name: name, Kind: tgt.Resource.Resource, UID: "uid-status-only"}}, metav1.SchemeGroupVersion
		case req.Method == http.MethodDelete && name == "pending":
			status = http.StatusAccepted
			obj, gv = &corev1.ConfigMap{ObjectMeta: meta}, corev1.SchemeGroupVersion
		case tgt.Subresource == "scale":
			obj, gv = &autoscalingv1.Scale{ObjectMeta: meta, Spec: autoscalingv1.ScaleSpec{Replicas: 3}}, autoscalingv1.SchemeGroupVersion
		case tgt.Resource.Group == "apps":
			obj, gv = &appsv1.Deployment{ObjectMeta: meta}, appsv1.SchemeGroupVersion
		default:
			obj, gv = &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"k": strings.Repeat("v", 2000)}}, corev1.SchemeGroupVersion
		}
		mediaType := runtime.ContentTypeJSON
		if strings.Contains(req.Header.Get("Accept"), runtime.ContentTypeProtobuf) {
			mediaType = runtime.ContentTypeProtobuf
		}
		info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
		body, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, gv), obj)
		if err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", mediaType)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

var (
	cmGR     = schema.GroupResource{Resource: "configmaps"}
	deployGR = schema.GroupResource{Group: "apps", Resource: "deployments"}
	theOwner = readyourwrites.Owner{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "parent"}, UID: "p1"}
)

func TestTypedClientWrites(t *testing.T) {
	for _, ct := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		t.Run(ct, func(t *testing.T) {
			srv := apiServer(t)
			rec := &fakeRecorder{}
			cfg := WrapConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: ct}}, rec)
			cs := kubernetes.NewForConfigOrDie(cfg)
			ctx := WithOwner(context.Background(), theOwner)
			cms := cs.CoreV1().ConfigMaps("ns")
			want := func(what string, wantCalls ...call) {
				t.Helper()
				got := rec.take()
				if len(got) != len(wantCalls) {
					t.Fatalf("%s: recorded %+v, want %+v", what, got, wantCalls)
				}
				for i := range got {
					w := wantCalls[i]
					w.owner = theOwner
					if w.labels == nil && !w.delete {
						w.labels = map[string]string{"app": "x"}
					}
					g := got[i]
					if g.delete != w.delete || g.owner != w.owner || g.gr != w.gr || g.ns != w.ns || g.name != w.name || g.uid != w.uid || g.rv != w.rv || fmt.Sprint(g.labels) != fmt.Sprint(w.labels) {
						t.Errorf("%s: recorded %+v, want %+v", what, g, w)
					}
				}
			}

			created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "c-"}}, metav1.CreateOptions{})
			if err != nil || created.Name != "created" || len(created.Data["k"]) != 2000 {
				t.Fatalf("the client did not get the whole response: %v %v", created, err)
			}
			want("create", call{gr: cmGR, ns: "ns", name: "created", uid: "uid-created", rv: "42"})

			if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			want("update", call{gr: cmGR, ns: "ns", name: "a", uid: "uid-a", rv: "42"})

			if _, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			want("patch", call{gr: cmGR, ns: "ns", name: "a", uid: "uid-a", rv: "42"})

			if _, err := cms.Apply(ctx, applycorev1.ConfigMap("b", "ns"), metav1.ApplyOptions{FieldManager: "t"}); err != nil {
				t.Fatal(err)
			}
			want("server-side apply", call{gr: cmGR, ns: "ns", name: "b", uid: "uid-b", rv: "42"})

			deps := cs.AppsV1().Deployments("ns")
			if _, err := deps.UpdateStatus(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}}, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			want("status", call{gr: deployGR, ns: "ns", name: "d", uid: "uid-d", rv: "42"})
			if ct == runtime.ContentTypeJSON { // the scale client of the typed clientset speaks JSON here
				sc, err := deps.UpdateScale(ctx, "d", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "d"}}, metav1.UpdateOptions{})
				if err != nil || sc.Spec.Replicas != 3 {
					t.Fatal(sc, err)
				}
				want("scale", call{gr: deployGR, ns: "ns", name: "d", uid: "uid-d", rv: "42"})
			}

			if err := cms.Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			want("delete returning the object", call{delete: true, gr: cmGR, ns: "ns", name: "gone", uid: "uid-gone", rv: "42", labels: map[string]string{"app": "x"}})
			if err := cms.Delete(ctx, "status-only", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			want("delete returning a Status", call{delete: true, gr: cmGR, ns: "ns", name: "status-only", uid: "uid-status-only"})
			if err := cms.Delete(ctx, "pending", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			want("delete accepted, object still there", call{gr: cmGR, ns: "ns", name: "pending", uid: "uid-pending", rv: "42"})

			// Passed through untouched.
			if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conflict"}}, metav1.UpdateOptions{}); err == nil {
				t.Fatal("the 409 was lost")
			}
			if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Fatal(err)
			}
			if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := cms.Update(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			want("failed write, get, dry run, deletecollection, no owner")
		})
	}
}

func TestDynamicClientWrites(t *testing.T) {
	srv := apiServer(t)
	rec := &fakeRecorder{}
	dc := dynamic.NewForConfigOrDie(WrapConfig(&rest.Config{Host: srv.URL}, rec))
	ctx := WithOwner(context.Background(), theOwner)
	gvr := appsv1.SchemeGroupVersion.WithResource("deployments")
	u := &unstructured.Unstructured{}
	u.SetName("d")
	if _, err := dc.Resource(gvr).Namespace("ns").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(gvr).Namespace("ns").Apply(ctx, "d", u, metav1.ApplyOptions{FieldManager: "t"}); err != nil {
		t.Fatal(err)
	}
	got := rec.take()
	if len(got) != 2 || got[0].gr != deployGR || got[1].gr != deployGR || got[1].name != "d" || got[1].rv != "42" {
		t.Fatalf("recorded %+v", got)
	}
}

func TestRecordErrorsAreReported(t *testing.T) {
	srv := apiServer(t)
	rec := &fakeRecorder{err: cache.ErrNotWatched}
	var reported []error
	cs := kubernetes.NewForConfigOrDie(WrapConfig(&rest.Config{Host: srv.URL}, rec,
		WithErrorHandler(func(_ context.Context, err error) { reported = append(reported, err) })))
	cm, err := cs.CoreV1().ConfigMaps("ns").Update(WithOwner(context.Background(), theOwner), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.UpdateOptions{})
	if err != nil || cm.ResourceVersion != "42" {
		t.Fatalf("a recording error reached the client: %v", err)
	}
	var re *RecordError
	if len(reported) != 1 || !errors.As(reported[0], &re) || !errors.Is(reported[0], cache.ErrNotWatched) || re.Method != http.MethodPut {
		t.Fatalf("reported %v", reported)
	}
}

// TestBodyBeyondTheBound: a response over the decoding bound reaches the
// client whole, unrecorded and reported.
func TestBodyBeyondTheBound(t *testing.T) {
	srv := apiServer(t)
	rec := &fakeRecorder{}
	var reported []error
	cs := kubernetes.NewForConfigOrDie(WrapConfig(&rest.Config{Host: srv.URL}, rec, WithMaxBodyBytes(100),
		WithErrorHandler(func(_ context.Context, err error) { reported = append(reported, err) })))
	cm, err := cs.CoreV1().ConfigMaps("ns").Update(WithOwner(context.Background(), theOwner), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.UpdateOptions{})
	if err != nil || len(cm.Data["k"]) != 2000 {
		t.Fatalf("client got %v, %v", cm, err)
	}
	if len(rec.take()) != 0 || len(reported) != 1 {
		t.Fatalf("reported %v", reported)
	}
}

// TestReplayBodyChunked: without a Content-Length (chunked), with a read
// error midway, the client sees the same bytes and then the same error.
func TestReplayBody(t *testing.T) {
	boom := errors.New("connection reset")
	rt := NewRoundTripper(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, ContentLength: -1, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(io.MultiReader(strings.NewReader(`{"kind":"ConfigMap","metadata":{"name":"a"`), errReader{boom}))}, nil
	}), &fakeRecorder{}, WithErrorHandler(func(context.Context, error) {}))
	req := httptest.NewRequestWithContext(WithOwner(context.Background(), theOwner), http.MethodPut, "http://x/api/v1/namespaces/ns/configmaps/a", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if string(b) != `{"kind":"ConfigMap","metadata":{"name":"a"` || !errors.Is(err, boom) {
		t.Fatalf("client read %q, %v", b, err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
