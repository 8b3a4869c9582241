package informers

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// its first list or watch request, and reads the namespace and the label
// and field selectors off that request, and the indexers off the informer.
// Nothing reaches a server. It reports false if newFunc's informer makes no
// request in time.
func captureScope(newFunc internalinterfaces.NewInformerFunc, resync time.Duration) (scope, bool) {
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
		return scope{}, false
	}
	plain := newFunc(client, resync)
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
		return scope{}, false
	}
	l, ok := apipath.ParseList(u)
	if !ok {
		return scope{}, false
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
	return s, true
}
