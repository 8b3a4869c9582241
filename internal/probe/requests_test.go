package probe

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// ObjectResourceVersion asks for one object by field selector and reads
// its resource version from the list, telling "not there" apart; an
// object of another namespace or name in the answer is not taken for it.
func TestObjectResourceVersion(t *testing.T) {
	var asked []string
	lw := &toolscache.ListWatch{ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
		asked = append(asked, o.FieldSelector)
		return &corev1.ConfigMapList{Items: []corev1.ConfigMap{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "a", ResourceVersion: "3"}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: "7"}},
		}}, nil
	}}
	ctx := context.Background()
	for _, c := range []struct {
		namespace, name, want string
		found                 bool
		selector              string
	}{
		{"ns", "a", "7", true, "metadata.name=a,metadata.namespace=ns"},
		{"ns", "b", "", false, "metadata.name=b,metadata.namespace=ns"},
		{"", "a", "3", true, "metadata.name=a"},
	} {
		asked = nil
		rv, found, err := ObjectResourceVersion(ctx, lw, c.namespace, c.name)
		if err != nil || rv != c.want || found != c.found {
			t.Errorf("%s/%s: got %q, %v, %v; want %q, %v", c.namespace, c.name, rv, found, err, c.want, c.found)
		}
		if len(asked) != 1 || asked[0] != c.selector {
			t.Errorf("%s/%s: field selectors sent %q, want [%q]", c.namespace, c.name, asked, c.selector)
		}
	}
}
