package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	countingv1alpha1 "github.com/freshinformer/freshinformer/examples/crdcontroller/apis/counting/v1alpha1"
)

// CRDResource is the resource of CustomResourceDefinitions, to create CRDs
// with a dynamic client.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRDs returns the CustomResourceDefinitions of Counters and Ceilings.
func CRDs() []*unstructured.Unstructured {
	return []*unstructured.Unstructured{
		crd("Counter", "counters", "Namespaced", map[string]any{"target": integer()}, map[string]any{"count": integer()}),
		crd("Ceiling", "ceilings", "Cluster", map[string]any{"max": integer()}, nil),
	}
}

func integer() map[string]any { return map[string]any{"type": "integer", "format": "int32"} }

func crd(kind, plural, scope string, spec, status map[string]any) *unstructured.Unstructured {
	group := countingv1alpha1.SchemeGroupVersion.Group
	properties := map[string]any{"spec": map[string]any{"type": "object", "properties": spec}}
	version := map[string]any{"name": countingv1alpha1.SchemeGroupVersion.Version, "served": true, "storage": true}
	if status != nil {
		properties["status"] = map[string]any{"type": "object", "properties": status}
		version["subresources"] = map[string]any{"status": map[string]any{}}
	}
	version["schema"] = map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": properties}}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group":    group,
			"scope":    scope,
			"names":    map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind)},
			"versions": []any{version},
		},
	}}
}

// InstallCRDs creates the CRDs (those that exist are left as they are) and
// waits until the API server serves them.
func InstallCRDs(ctx context.Context, client dynamic.Interface) error {
	for _, crd := range CRDs() {
		if _, err := client.Resource(CRDResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := client.Resource(CRDResource).Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conditions {
				if c, ok := c.(map[string]any); ok && c["type"] == "Established" && c["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.GetName(), err)
		}
	}
	return nil
}
