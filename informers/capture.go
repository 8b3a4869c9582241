package informers

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/apipath"
)

// scope is what one informer lists and how it indexes.
type scope struct {
	namespace string
	tweak     func(*metav1.ListOptions)
	indexers  toolscache.Indexers
}

// errCaptured ends the one request a capture lets through.
var errCaptured = errors.New("freshinformer: request captured, not sent")

// captureTimeout bounds how long a capture waits for newFunc's informer to
// make its first request.
const captureTimeout = 5 * time.Second

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// captureScope learns what an informer built by newFunc lists and how it
// indexes, without reading client-go's private fields: it builds the
// informer over a clientset whose transport answers nothing, runs it until
// its first list or watch request, and reads the resource, the namespace
// and the label and field selectors off that request, and the indexers off
// the informer. Nothing reaches a server. It reports false if newFunc
// builds no informer or its informer makes no request in time.
func captureScope(newFunc internalinterfaces.NewInformerFunc, resync time.Duration) (scope, schema.GroupVersionResource, bool) {
	captured := make(chan *url.URL, 1)
	transport := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		select {
		case captured <- r.URL:
		default:
		}
		return nil, errCaptured
	})
	client, err := kubernetes.NewForConfigAndClient(&rest.Config{Host: "http://capture.invalid"}, &http.Client{Transport: transport})
	if err != nil {
		return scope{}, schema.GroupVersionResource{}, false
	}
	plain := newFunc(client, resync)
	if plain == nil {
		return scope{}, schema.GroupVersionResource{}, false
	}
	_ = plain.SetWatchErrorHandlerWithContext(func(context.Context, *toolscache.Reflector, error) {}) // quiet: the error is ours
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); plain.RunWithContext(ctx) }()
	var u *url.URL
	select {
	case u = <-captured:
	case <-time.After(captureTimeout):
	}
	cancel()
	<-done
	if u == nil {
		return scope{}, schema.GroupVersionResource{}, false
	}
	l, ok := apipath.ParseList(u)
	version := versionOf(u.Path)
	if !ok || version == "" {
		return scope{}, schema.GroupVersionResource{}, false
	}
	s := scope{
		namespace: l.Namespace,
		indexers:  plain.GetIndexer().GetIndexers(),
	}
	if l.LabelSelector != "" || l.FieldSelector != "" {
		s.tweak = func(o *metav1.ListOptions) {
			o.LabelSelector, o.FieldSelector = l.LabelSelector, l.FieldSelector
		}
	}
	return s, l.Resource.WithVersion(version), true
}

// versionOf returns the version in an API path, /api/VERSION/... or
// /apis/GROUP/VERSION/..., found as apipath.Parse finds the group: after
// the first api or apis segment. It returns "" for any other path.
func versionOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		switch {
		case p == "api" && i+1 < len(parts):
			return parts[i+1]
		case p == "apis" && i+2 < len(parts):
			return parts[i+2]
		case p == "api" || p == "apis":
			return ""
		}
	}
	return ""
}
