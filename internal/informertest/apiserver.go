package informertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// ServeConfigMaps serves the ConfigMaps of client (a fake clientset that
// stamps resource versions: freshtest's) over HTTP on the loopback, as an
// API server does (list, watch and watch-list, get, create, update), so
// code written for a real clientset (toolscache.NewListWatchFromClient,
// rest.Config transports) runs in an example. It returns the config of a
// client of it and a function that closes it; stop the informers first.
func ServeConfigMaps(client kubernetes.Interface) (*rest.Config, func()) {
	srv := httptest.NewServer(&configMaps{client: client})
	cfg := &rest.Config{Host: srv.URL, Transport: &http.Transport{DisableKeepAlives: true}}
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json" // it serves JSON only
	return cfg, func() {
		srv.CloseClientConnections()
		srv.Close()
	}
}

type configMaps struct{ client kubernetes.Interface }

func (s *configMaps) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ns, name, ok := parseConfigMapPath(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	var opts metav1.ListOptions
	if err := scheme.ParameterCodec.DecodeParameters(r.URL.Query(), corev1.SchemeGroupVersion, &opts); err != nil {
		s.fail(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	cms := s.client.CoreV1().ConfigMaps(ns)
	ctx := r.Context()
	switch {
	case r.Method == http.MethodGet && name == "" && opts.Watch:
		s.watch(ctx, w, ns, opts)
	case r.Method == http.MethodGet && name == "":
		list, err := cms.List(ctx, opts)
		s.reply(w, list, err)
	case r.Method == http.MethodGet:
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		s.reply(w, cm, err)
	case r.Method == http.MethodPost || r.Method == http.MethodPut:
		var cm corev1.ConfigMap
		if err := json.NewDecoder(r.Body).Decode(&cm); err != nil {
			s.fail(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		var got *corev1.ConfigMap
		var err error
		if r.Method == http.MethodPost {
			got, err = cms.Create(ctx, &cm, metav1.CreateOptions{})
		} else {
			got, err = cms.Update(ctx, &cm, metav1.UpdateOptions{})
		}
		s.reply(w, got, err)
	default:
		s.fail(w, apierrors.NewMethodNotSupported(corev1.Resource("configmaps"), r.Method))
	}
}

// parseConfigMapPath takes /api/v1/configmaps,
// /api/v1/namespaces/NS/configmaps and /api/v1/namespaces/NS/configmaps/NAME.
func parseConfigMapPath(path string) (ns, name string, ok bool) {
	p := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(p) == 3 && p[0] == "api" && p[1] == "v1" && p[2] == "configmaps":
		return "", "", true
	case len(p) >= 5 && len(p) <= 6 && p[0] == "api" && p[1] == "v1" && p[2] == "namespaces" && p[4] == "configmaps":
		if len(p) == 6 {
			name = p[5]
		}
		return p[3], name, true
	}
	return "", "", false
}

func (s *configMaps) watch(ctx context.Context, w http.ResponseWriter, ns string, opts metav1.ListOptions) {
	var initial []watch.Event
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		// Watch-list: the current state as events, then the bookmark that
		// ends it, then the changes from there.
		list, err := s.client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			s.fail(w, err)
			return
		}
		for i := range list.Items {
			initial = append(initial, watch.Event{Type: watch.Added, Object: &list.Items[i]})
		}
		initial = append(initial, watch.Event{Type: watch.Bookmark, Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: list.ResourceVersion,
			Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
		}}})
		opts.ResourceVersion, opts.SendInitialEvents, opts.ResourceVersionMatch = list.ResourceVersion, nil, ""
	}
	wi, err := s.client.CoreV1().ConfigMaps(ns).Watch(ctx, opts)
	if err != nil {
		s.fail(w, err)
		return
	}
	defer wi.Stop()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	send := func(e watch.Event) bool {
		obj := withKind(e.Object)
		raw, err := json.Marshal(obj)
		if err != nil {
			return false
		}
		if err := enc.Encode(metav1.WatchEvent{Type: string(e.Type), Object: runtime.RawExtension{Raw: raw}}); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	for _, e := range initial {
		if !send(e) {
			return
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-wi.ResultChan():
			if !ok || !send(e) {
				return
			}
		}
	}
}

// withKind sets the kind a client decodes by.
func withKind(obj runtime.Object) runtime.Object {
	obj = obj.DeepCopyObject()
	switch obj.(type) {
	case *corev1.ConfigMap:
		obj.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	case *corev1.ConfigMapList:
		obj.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	}
	return obj
}

func (s *configMaps) reply(w http.ResponseWriter, obj runtime.Object, err error) {
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(withKind(obj))
}

func (s *configMaps) fail(w http.ResponseWriter, err error) {
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_, _ = io.WriteString(w, mustJSON(st))
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":%q}`, err)
	}
	return string(b)
}
