package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Counter asks the controller to count status.count up to spec.target, one
// write at a time.
type Counter struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CounterSpec   `json:"spec"`
	Status CounterStatus `json:"status,omitempty"`
}

// CounterSpec is what a Counter asks for.
type CounterSpec struct {
	// Target is the count to reach (capped by the Ceiling named default).
	Target int32 `json:"target"`
}

// CounterStatus is how far a Counter has got.
type CounterStatus struct {
	Count int32 `json:"count"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CounterList is a list of Counters.
type CounterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`

	Items []Counter `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Ceiling caps the target of every Counter: the controller reads the one
// named default, if there is one.
type Ceiling struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec CeilingSpec `json:"spec"`
}

// CeilingSpec is the cap.
type CeilingSpec struct {
	Max int32 `json:"max"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CeilingList is a list of Ceilings.
type CeilingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`

	Items []Ceiling `json:"items"`
}
