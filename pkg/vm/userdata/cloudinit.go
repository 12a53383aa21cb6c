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
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"mime"
	"strings"

	"sigs.k8s.io/yaml"
)

// mergeType is cloud-init's merge_how for the provider's part. cloud-init
// folds the parts in order, each into what the earlier ones built, using the
// rules of the part being folded in. dict(no_replace) keeps every key the
// user set (nested dicts such as ssh_keys are always recursed into, so our
// entries only fill gaps); recurse_list hands lists such as users to
// list(append), which adds our entries after the user's; str() keeps the
// user's strings as they are.
const mergeType = "list(append)+dict(no_replace,recurse_list)+str()"

// sudoRule lets the provider's user run anything as root without a password:
// the account has no password (lock_passwd), so a password prompt could never
// be answered.
const sudoRule = "ALL=(ALL) NOPASSWD:ALL"

// Content types cloud-init knows. notMultipart makes cloud-init look at the
// part's first line to find its type, exactly as it does for bare user data.
const (
	typeCloudConfig  = "text/cloud-config"
	typeShellScript  = "text/x-shellscript"
	typeNotMultipart = "text/x-not-multipart"
	typeGzip         = "application/gzip"
)

// maxLineLen is RFC 5322's line limit, CRLF excluded; longer lines may be
// rewrapped by mail-minded parsers, so such bodies are base64-encoded.
const maxLineLen = 998

// mimePart is one part of the multipart document.
type mimePart struct {
	headers []string
	// raw parts are a complete MIME entity (headers, blank line, body) that
	// is written as is.
	raw  bool
	body []byte
}

// renderCloudConfig wraps data and a cloud-config with the additions in a
// multipart/mixed document that cloud-init processes part by part.
func renderCloudConfig(data []byte, add Additions) ([]byte, error) {
	ours, err := additionsCloudConfig(add, !definesUsers(data))
	if err != nil {
		return nil, err
	}
	var parts []mimePart
	// cloud-init would warn about an empty part it cannot classify, and an
	// empty user data has nothing to keep anyway.
	if len(data) > 0 {
		parts = append(parts, userPart(data))
	}
	parts = append(parts, textPart(typeCloudConfig, ours, "Merge-Type: "+mergeType))

	bodies := make([][]byte, len(parts))
	for i, p := range parts {
		bodies[i] = p.body
	}
	boundary := chooseBoundary(hashCandidates(bodies), bodies...)

	var b bytes.Buffer
	b.WriteString("Content-Type: " + mime.FormatMediaType("multipart/mixed",
		map[string]string{"boundary": boundary}) + "\r\n")
	b.WriteString("MIME-Version: 1.0\r\n\r\n")
	for _, p := range parts {
		b.WriteString("--" + boundary + "\r\n")
		for _, h := range p.headers {
			b.WriteString(h + "\r\n")
		}
		if !p.raw {
			b.WriteString("\r\n")
		}
		b.Write(p.body)
		// This line break belongs to the delimiter that follows (RFC 2046),
		// so the part's body is exactly what was written above.
		b.WriteString("\r\n")
	}
	b.WriteString("--" + boundary + "--\r\n")
	return b.Bytes(), nil
}

// userPart labels the user's data the way cloud-init would read it bare:
// it first un-gzips, then parses anything with a "MIME-Version:" header in
// its first 4096 bytes as MIME, and otherwise goes by the first line.
func userPart(data []byte) mimePart {
	switch {
	case isGzip(data):
		return textPart(typeGzip, data)
	case isMIME(data):
		// A MIME entity carries its own headers, so it becomes the part
		// itself, unchanged: a multipart document becomes a nested
		// multipart part. Multipart entities may not be base64-encoded
		// (RFC 2045), and cloud-init walks nested parts.
		return mimePart{raw: true, body: data}
	}
	switch sniff(data) {
	case kindCloudConfig:
		return textPart(typeCloudConfig, data)
	case kindScript:
		return textPart(typeShellScript, data)
	}
	// "#include", "## template: jinja", "#cloud-boothook" and the rest:
	// let cloud-init classify the part as it would the bare data.
	return textPart(typeNotMultipart, data)
}

// textPart makes a leaf part, base64-encoded when the body would not survive
// as 7-bit text. cloud-init matters here: it decodes an unencoded non-ASCII
// body with Python's raw-unicode-escape, which mangles UTF-8.
func textPart(contentType string, body []byte, extra ...string) mimePart {
	p := mimePart{headers: append([]string{"Content-Type: " + contentType}, extra...), body: body}
	if needsBase64(body) {
		p.headers = append(p.headers, "Content-Transfer-Encoding: base64")
		p.body = base64Lines(body)
	}
	return p
}

// needsBase64 reports whether body is anything but 7-bit text with lines of
// at most maxLineLen bytes. A bare CR counts as binary: parsers split lines
// at it and may give it back as a different line ending.
func needsBase64(body []byte) bool {
	lineLen := 0
	for i, c := range body {
		switch {
		case c == '\n':
			lineLen = 0
			continue
		case c == '\r':
			if i+1 >= len(body) || body[i+1] != '\n' {
				return true
			}
			continue
		case c == '\t' || (c >= 0x20 && c <= 0x7e):
		default:
			return true
		}
		lineLen++
		if lineLen > maxLineLen {
			return true
		}
	}
	return false
}

// base64Lines encodes body in lines of 76 characters, as RFC 2045 requires.
func base64Lines(body []byte) []byte {
	enc := base64.StdEncoding.EncodeToString(body)
	var b bytes.Buffer
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc)
	return b.Bytes()
}

// hashCandidates derives boundaries from the parts' contents, so the same
// input always renders the same output and a controller that re-renders on
// every reconcile does not rewrite the VM's user data Secret each time.
func hashCandidates(bodies [][]byte) func(int) string {
	h := sha256.New()
	for _, body := range bodies {
		_ = binary.Write(h, binary.BigEndian, uint64(len(body)))
		h.Write(body)
	}
	seed := h.Sum(nil)
	return func(i int) string {
		sum := sha256.Sum256(binary.BigEndian.AppendUint64(bytes.Clone(seed), uint64(i)))
		return "capkv-" + hex.EncodeToString(sum[:16])
	}
}

// chooseBoundary returns the first candidate that occurs in none of the
// bodies: a boundary inside a part would cut that part short.
func chooseBoundary(candidate func(int) string, bodies ...[]byte) string {
	for i := 0; ; i++ {
		boundary := candidate(i)
		clash := false
		for _, body := range bodies {
			if bytes.Contains(body, []byte(boundary)) {
				clash = true
				break
			}
		}
		if !clash {
			return boundary
		}
	}
}

// cloudConfigAdditions is the provider's cloud-config part.
type cloudConfigAdditions struct {
	// SSHKeys makes cloud-init write these host keys. Once ssh_keys is
	// present cloud-init generates no host keys at all, and its default
	// ssh_deletekeys (left alone on purpose) first removes any keys baked
	// into the image, which every VM cloned from it would share.
	SSHKeys map[string]string `json:"ssh_keys,omitempty"`
	Users   []any             `json:"users,omitempty"`
	// WriteFiles runs in cloud-init's first stage, before the user's
	// runcmd; merging appends them to the user's list.
	WriteFiles []cloudFile `json:"write_files,omitempty"`
}

// cloudFile is one entry of cloud-config's write_files.
type cloudFile struct {
	Path        string `json:"path"`
	Permissions string `json:"permissions"`
	Encoding    string `json:"encoding"`
	Content     string `json:"content"`
}

// cloudUser is one entry of cloud-config's users list.
type cloudUser struct {
	Name              string   `json:"name"`
	SSHAuthorizedKeys []string `json:"ssh_authorized_keys"`
	Sudo              string   `json:"sudo"`
	LockPasswd        bool     `json:"lock_passwd"`
}

// additionsCloudConfig renders the provider's cloud-config.
//
// A users list in user data replaces the image's (whose usual content is
// "default", the distro's login user), so when the user's data sets no users
// of its own the list starts with "default" to keep that user; when it does,
// the user's list is left to decide, since merging appends ours to it.
func additionsCloudConfig(add Additions, keepDefaultUser bool) ([]byte, error) {
	var cfg cloudConfigAdditions
	if add.hasHostKey() {
		cfg.SSHKeys = map[string]string{
			"ed25519_private": string(add.SSHHostKey),
			"ed25519_public":  add.SSHHostPublicKey,
		}
	}
	if add.hasUser() {
		if keepDefaultUser {
			cfg.Users = append(cfg.Users, "default")
		}
		cfg.Users = append(cfg.Users, cloudUser{
			Name:              add.SSHUser,
			SSHAuthorizedKeys: add.SSHAuthorizedKeys,
			Sudo:              sudoRule,
			LockPasswd:        true,
		})
	}
	for _, f := range add.Files {
		cfg.WriteFiles = append(cfg.WriteFiles, cloudFile{Path: f.Path, Permissions: fmt.Sprintf("%#o", f.Mode),
			Encoding: "b64", Content: base64.StdEncoding.EncodeToString(f.Contents)})
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		// The input is the provider's own, never bootstrap data, but the
		// error cannot quote it anyway: it may hold the private host key.
		return nil, fmt.Errorf("rendering cloud-config additions failed")
	}
	return append([]byte("#cloud-config\n"), out...), nil
}

// isGzip matches the gzip magic number cloud-init checks before anything else.
func isGzip(data []byte) bool {
	return len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b
}

// isMIME applies cloud-init's own test for MIME user data.
func isMIME(data []byte) bool {
	head := data[:min(len(data), 4096)]
	return bytes.Contains(bytes.ToLower(head), []byte("mime-version:"))
}

// kind is what cloud-init makes of a part from its first line.
type kind int

const (
	kindOther kind = iota
	kindCloudConfig
	kindScript
)

// sniff mimics cloud-init's first-line detection, which ignores leading
// white space and case, and must not take "#cloud-config-archive" or
// "#cloud-config-jsonp" for "#cloud-config".
func sniff(data []byte) kind {
	data = bytes.TrimLeft(data, " \t\r\n")
	head := strings.ToLower(string(data[:min(len(data), 64)]))
	switch {
	case strings.HasPrefix(head, "#!"):
		return kindScript
	case strings.HasPrefix(head, "#cloud-config") &&
		!strings.HasPrefix(head, "#cloud-config-"):
		return kindCloudConfig
	}
	return kindOther
}
