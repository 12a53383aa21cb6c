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
