// +k8s:deepcopy-gen=package
// +groupName=counting.examples.freshinformer.io

// Package v1alpha1 is the API of the example CRD controller: Counters,
// which ask for a count, and Ceilings, which cap every Counter's target.
package v1alpha1
