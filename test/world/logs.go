/*
Copyright 2026 The CAPKV Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package world

import (
	"flag"
	"io"
	"log"
	"os"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// QuietLogs silences the world's in-process components (Cluster API logs
// its expected transient errors while a cluster comes up), unless
// TESTENV_VERBOSE is set, which logs everything to stderr. Tests report
// failures through their own assertions.
func QuietLogs() {
	if os.Getenv("TESTENV_VERBOSE") != "" {
		logger := zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.Level(-5)))
		ctrl.SetLogger(logger)
		klog.SetLogger(logger)
		return
	}
	{
		log.SetOutput(io.Discard)
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("v", "0")
		_ = fs.Set("logtostderr", "false")
		_ = fs.Set("stderrthreshold", "ERROR")
		klog.SetOutput(io.Discard)
	}
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
}
