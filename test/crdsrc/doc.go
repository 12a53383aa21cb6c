// Package crdsrc holds root types that wrap the KubeVirt, CDI and Multus API
// types, so that controller-gen can write CustomResourceDefinitions for them
// with their full schemas. Real KubeVirt and CDI install these CRDs through
// their operators; the test world installs the generated ones instead. The
// wrappers are only read by controller-gen and never used at run time.
package crdsrc
