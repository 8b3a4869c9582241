package writes

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/freshinformer/freshinformer/readyourwrites"
)

// countingRecorder counts records and keeps nothing.
type countingRecorder struct{ n int }

func (r *countingRecorder) Record(readyourwrites.Owner, schema.GroupResource, metav1.Object) error {
	r.n++
	return nil
}
func (r *countingRecorder) RecordDelete(readyourwrites.Owner, schema.GroupResource, metav1.Object) error {
	r.n++
	return nil
}

func encode(b *testing.B, mediaType string, obj runtime.Object) []byte {
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	body, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), obj)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkUpdate is one typed-client Update against a local HTTP server
// (a ConfigMap of about 2 KB, with managed fields), through the plain
// transport, the recording one and the recording one with the stale-write
// detector on: the differences are the cost of recording a write (read the
// body once more, decode its metadata, call Record) and of checking the
// request's resource version (decode a copy of the request body's
// metadata).
func BenchmarkUpdate(b *testing.B) {
	srv := apiServer(b)
	for _, ct := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		for _, transport := range []string{"plain", "recording", "detecting"} {
			b.Run("content="+map[string]string{runtime.ContentTypeJSON: "json", runtime.ContentTypeProtobuf: "protobuf"}[ct]+"/transport="+transport, func(b *testing.B) {
				cfg := &rest.Config{Host: srv.URL, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: ct}}
				rec := &countingRecorder{}
				switch transport {
				case "recording":
					cfg = WrapConfig(cfg, rec)
				case "detecting":
					cfg = WrapConfig(cfg, rec, WithStaleWriteDetection(nil))
				}
				cms := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps("ns")
				ctx := WithOwner(context.Background(), theOwner)
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "42"}} // as the server returns it: never stale
				b.ReportAllocs()
				for b.Loop() {
					if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				if transport != "plain" && rec.n != b.N {
					b.Fatalf("recorded %d of %d", rec.n, b.N)
				}
			})
		}
	}
}

// BenchmarkDecodeMeta is the decoding alone, per content type.
func BenchmarkDecodeMeta(b *testing.B) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "u", ResourceVersion: "42", Labels: map[string]string{"app": "x"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "test", Operation: metav1.ManagedFieldsOperationApply}}},
		Data: map[string]string{"k": strings.Repeat("v", 2000)}}
	for _, mt := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		body := encode(b, mt, cm)
		b.Run(mt, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d, err := decodeMeta(mt, body); err != nil || d.meta.ResourceVersion != "42" {
					b.Fatal(d, err)
				}
			}
		})
	}
}
