// Package version reports the build version of the manager.
package version

import (
	"fmt"
	"runtime"
)

// Version is set at build time with -ldflags; "dev" marks a local build.
var Version = "dev"

// String describes the build for --version and the startup log.
func String() string {
	return fmt.Sprintf("capkv %s (%s, %s/%s)", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
