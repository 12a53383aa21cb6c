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

package userdata

import (
	"bytes"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// maxMIMEDepth bounds how deep definesUsers follows nested multipart
// documents; real user data nests once or twice at most.
const maxMIMEDepth = 8

// definesUsers reports whether the user's data visibly sets cloud-config's
// "users". It answers false whenever it cannot tell (templates, includes,
// gzip, unparsable data), because then keeping the image's default user is
// the behaviour the user most likely gets without the provider.
func definesUsers(data []byte) bool {
	if isGzip(data) {
		return false
	}
	if isMIME(data) {
		msg, err := mail.ReadMessage(bytes.NewReader(data))
		if err != nil {
			return false
		}
		return mimeDefinesUsers(msg.Header.Get("Content-Type"),
			msg.Header.Get("Content-Transfer-Encoding"), msg.Body, 0)
	}
	return cloudConfigHasUsers(data, false)
}

// mimeDefinesUsers looks for "users" in one MIME entity and, for a
// multipart one, in each of its parts.
func mimeDefinesUsers(contentType, encoding string, body io.Reader, depth int) bool {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		// Python's email package, which cloud-init uses, falls back to
		// text/plain, and cloud-init then looks at the first line.
		mediaType = "text/plain"
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		if depth >= maxMIMEDepth || params["boundary"] == "" {
			return false
		}
		mr := multipart.NewReader(body, params["boundary"])
		for {
			// NextPart already undoes quoted-printable encoding.
			p, err := mr.NextPart()
			if err != nil {
				return false
			}
			if mimeDefinesUsers(p.Header.Get("Content-Type"),
				p.Header.Get("Content-Transfer-Encoding"), p, depth+1) {
				return true
			}
		}
	}
	payload, err := io.ReadAll(body)
	if err != nil {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(encoding), "base64") {
		if payload, err = decodeBase64Lines(payload); err != nil {
			return false
		}
	}
	return cloudConfigHasUsers(payload, mediaType == typeCloudConfig)
}

// decodeBase64Lines decodes a base64 body broken into lines.
func decodeBase64Lines(body []byte) ([]byte, error) {
	compact := bytes.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, body)
	return base64.StdEncoding.DecodeString(string(compact))
}

// jinjaHeader marks a cloud-init Jinja template, which is what CABPK emits;
// the template's type is given by the line after it.
const jinjaHeader = "## template: jinja"

// topLevelUsersRE finds a "users" key at the top level of a YAML document
// (block scalars and nested keys are always indented).
var topLevelUsersRE = regexp.MustCompile(`(?m)^users[ \t]*:`)

// cloudConfigHasUsers reports whether payload is a cloud-config, possibly a
// Jinja template of one, that sets "users" at its top level. labelled says
// the MIME headers already call it a cloud-config.
func cloudConfigHasUsers(payload []byte, labelled bool) bool {
	if first, rest, ok := bytes.Cut(payload, []byte("\n")); ok &&
		strings.EqualFold(strings.TrimSpace(string(first)), jinjaHeader) {
		payload, labelled = rest, false
	}
	if !labelled && sniff(payload) != kindCloudConfig {
		return false
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(payload, &cfg); err == nil {
		_, ok := cfg["users"]
		return ok
	}
	// Jinja expressions rarely make valid YAML; a line scan still finds
	// the key in what CABPK generates.
	return topLevelUsersRE.Match(payload)
}
