//go:build tools

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

// Package tools pins Prometheus (v3.16.0, module version v0.316.0), which
// the monitoring test and the sandbox run against the provider's metrics
// endpoint. It is built with the remove_all_sd tag: the test scrapes a
// static target, and no cloud service discovery is compiled in.
package tools

import _ "github.com/prometheus/prometheus/cmd/prometheus"
