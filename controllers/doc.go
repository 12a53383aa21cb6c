// Package controllers holds the thin reconcilers of the CAPKV kinds. Each one
// fetches its object, finds its Cluster API owners, honours pause, patches
// once at the end, and delegates the work to the packages under pkg/.
package controllers
