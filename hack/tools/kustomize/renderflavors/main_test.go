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

package main

import (
	"strings"
	"testing"
)

func TestDefaults(t *testing.T) {
	for in, want := range map[string]string{
		"size: ${SIZE:=20Gi}\n":                  "size: 20Gi\n",
		`url: "${IMAGE:=docker://a/b:${V:=v1}}"`: `url: "docker://a/b:v1"`,
		"a: ${A:=}\nb: $HOME {x}\n":              "a: \nb: $HOME {x}\n",
		"none: here\n":                           "none: here\n",
	} {
		got, err := defaults([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("defaults(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"a: 1\nname: ${CLUSTER_NAME}-x\n": `line 2: "${CLUSTER_NAME}-x" is no clusterctl variable with a default`,
		"a: ${A:=${B}}\n":                 `line 1: "${B}}" is no clusterctl variable with a default`,
		"a: ${A:=x\n":                     `line 1: "${A:=x" has no closing }`,
		"a: ${A:-x}\n":                    `line 1: "${A:-x}" is no clusterctl variable with a default`,
	} {
		if _, err := defaults([]byte(in)); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("defaults(%q): %v, want %s", in, err, want)
		}
	}
}

func TestFold(t *testing.T) {
	long := strings.Repeat("word ", 30) + "end."
	in := "a:\n  description: >-\n    " + long + "\n  script: |\n    " + long + "\n  items:\n  - >\n    " + long + "\n  - name: x\n"
	got, err := fold(in)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(got, "\n")
	for i, l := range lines {
		if len(l) > foldWidth && l != "    "+long {
			t.Errorf("line %d is %d columns: %q", i+1, len(l), l)
		}
	}
	if strings.Count(got, "    "+long) != 1 {
		t.Errorf("the literal scalar's line was wrapped, or a folded one was not:\n%s", got)
	}
	if !strings.HasSuffix(got, "  - name: x\n") {
		t.Errorf("the lines after the folded sequence item changed:\n%s", got)
	}
	if again, err := fold(got); err != nil || again != got {
		t.Errorf("fold is not idempotent: %v\n%s", err, again)
	}
}
