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

// Package monitoring runs the real Prometheus (bin/prometheus) against the
// provider's secure metrics endpoint with what the provider ships for it:
// the ServiceMonitor's scrape settings and the reader RBAC of
// config/prometheus, its alert rules, and the queries of the Grafana
// dashboard in config/grafana. It also renders the dashboard's main panels
// as PNG files. See docs/observability.md.
package monitoring

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// Options configure a Prometheus server.
type Options struct {
	// Target is the host:port of the provider's metrics endpoint.
	Target string
	// Token is the bearer token the scrape sends (ScraperToken).
	Token string
	// Interval is how often the target is scraped and the rules are
	// evaluated; zero means every second.
	Interval time.Duration
	// Speedup shortens the shipped alerts' waits (ScaleRules); zero or 1
	// keeps them as shipped.
	Speedup float64
	// Dir keeps the configuration, the TSDB and the log; empty uses a
	// temporary directory removed by Stop.
	Dir string
}

// Server is a running Prometheus.
type Server struct {
	// URL is where its HTTP API listens.
	URL string
	// API queries it.
	API promv1.API

	cmd     *exec.Cmd
	log     *os.File
	dir     string
	tempDir bool
	// exited is closed once the process exited, with its error in waitErr.
	exited  chan struct{}
	waitErr error
}

// Start writes the configuration and rules and starts bin/prometheus on a
// free loopback port, returning once it is ready.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	s := &Server{dir: o.Dir, exited: make(chan struct{})}
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "capkv-prometheus-")
		if err != nil {
			return nil, err
		}
		s.dir, s.tempDir = dir, true
	}
	if err := s.writeConfig(o); err != nil {
		return nil, errors.Join(err, s.cleanup())
	}
	port, err := testenv.FreePort()
	if err != nil {
		return nil, errors.Join(err, s.cleanup())
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.URL = "http://" + addr
	log, err := os.Create(filepath.Join(s.dir, "prometheus.log"))
	if err != nil {
		return nil, errors.Join(err, s.cleanup())
	}
	s.log = log
	s.cmd = exec.Command(filepath.Join(testenv.BinDir(), "prometheus"), //nolint:gosec // a binary this repository builds
		"--config.file="+filepath.Join(s.dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(s.dir, "data"),
		"--web.listen-address="+addr,
	)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	// Dies with the process that started it: nothing outlives a crashed
	// test or sandbox.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("starting prometheus (make tools builds bin/prometheus): %w", err), s.cleanup())
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	c, err := promapi.NewClient(promapi.Config{Address: s.URL})
	if err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	s.API = promv1.NewAPI(c)
	if err := s.waitReady(ctx); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

// waitReady waits for /-/ready, or for the process to exit.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-s.exited:
			return false, fmt.Errorf("prometheus exited (see %s): %w", s.log.Name(), s.waitErr)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		_ = resp.Body.Close()
		last = fmt.Errorf("/-/ready answered %s", resp.Status)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("prometheus is not ready: %w", errors.Join(err, last))
	}
	return nil
}

// WaitTargetUp waits until the provider's endpoint is scraped
// successfully, and returns the last scrape error Prometheus reported if it
// is not within timeout.
func (s *Server) WaitTargetUp(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := errors.New("no target yet")
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		targets, err := s.API.Targets(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		for _, t := range targets.Active {
			if t.ScrapePool != scrapeJob {
				continue
			}
			if t.Health == promv1.HealthGood {
				return true, nil
			}
			last = fmt.Errorf("target %s is %s: %s", t.ScrapeURL, t.Health, t.LastError)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the provider's metrics endpoint is not scraped: %w", last)
	}
	return nil
}

// WaitScrapedAfter waits until a scrape of the provider's endpoint that
// started after t succeeded, so that a query sees the state of t.
func (s *Server) WaitScrapedAfter(ctx context.Context, t time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	query := `timestamp(up{job="` + scrapeJob + `"} == 1)`
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		value, _, err := s.API.Query(ctx, query, time.Now())
		if err != nil {
			return false, nil //nolint:nilerr // Prometheus may be busy; ask again
		}
		vector, ok := value.(model.Vector)
		return ok && len(vector) == 1 && float64(vector[0].Value) >= float64(t.UnixMilli())/1000, nil
	})
	if err != nil {
		return fmt.Errorf("no successful scrape of the provider since %s: %w", t.Format(time.TimeOnly), err)
	}
	return nil
}

// Stop stops Prometheus and removes its temporary directory.
func (s *Server) Stop() error {
	var errs []error
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited: // the exit status after SIGTERM says nothing useful
		case <-time.After(20 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
			errs = append(errs, errors.New("prometheus did not stop within 20s and was killed"))
		}
	}
	if s.log != nil {
		errs = append(errs, s.log.Close())
	}
	return errors.Join(append(errs, s.cleanup())...)
}

func (s *Server) cleanup() error {
	if s.tempDir {
		return os.RemoveAll(s.dir)
	}
	return nil
}

// scrapeJob is the job name of the provider's endpoint.
const scrapeJob = "capkv"

// config is the part of Prometheus' configuration file used here.
type config struct {
	Global        globalConfig   `json:"global"`
	RuleFiles     []string       `json:"rule_files"`
	ScrapeConfigs []scrapeConfig `json:"scrape_configs"`
}

type globalConfig struct {
	ScrapeInterval     string `json:"scrape_interval"`
	EvaluationInterval string `json:"evaluation_interval"`
}

type scrapeConfig struct {
	JobName       string            `json:"job_name"`
	Scheme        string            `json:"scheme"`
	MetricsPath   string            `json:"metrics_path"`
	Authorization map[string]string `json:"authorization"`
	TLSConfig     map[string]bool   `json:"tls_config"`
	StaticConfigs []staticConfig    `json:"static_configs"`
}

type staticConfig struct {
	Targets []string `json:"targets"`
}

// writeConfig writes prometheus.yml, the token and the rules: one scrape
// job with the shipped ServiceMonitor's endpoint settings, and the shipped
// alerts scaled by o.Speedup.
func (s *Server) writeConfig(o Options) error {
	endpoint, err := ShippedEndpoint()
	if err != nil {
		return err
	}
	rules, err := ShippedRules()
	if err != nil {
		return err
	}
	if o.Speedup > 1 {
		rules = ScaleRules(rules, o.Speedup)
	}
	tokenFile := filepath.Join(s.dir, "token")
	if err := os.WriteFile(tokenFile, []byte(o.Token), 0o600); err != nil {
		return err
	}
	rulesFile := filepath.Join(s.dir, "rules.yml")
	if err := writeYAML(rulesFile, rules); err != nil {
		return err
	}
	interval := promDuration(o.Interval)
	return writeYAML(filepath.Join(s.dir, "prometheus.yml"), config{
		Global:    globalConfig{ScrapeInterval: interval, EvaluationInterval: interval},
		RuleFiles: []string{rulesFile},
		ScrapeConfigs: []scrapeConfig{{
			JobName:       scrapeJob,
			Scheme:        endpoint.Scheme,
			MetricsPath:   endpoint.Path,
			Authorization: map[string]string{"type": "Bearer", "credentials_file": tokenFile},
			TLSConfig:     map[string]bool{"insecure_skip_verify": endpoint.TLSConfig.InsecureSkipVerify},
			StaticConfigs: []staticConfig{{Targets: []string{o.Target}}},
		}},
	})
}

func writeYAML(path string, v any) error {
	data, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// promDuration formats d as a Prometheus duration, in whole milliseconds.
func promDuration(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}
