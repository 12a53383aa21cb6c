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

// Package userdata prepares the bootstrap data a KubeVirt VM boots with: the
// user's data unchanged, plus the provider's own additions as separate parts.
//
// Bootstrap data holds secrets (join tokens, certificates), so nothing in this
// package ever quotes it in an error or a log line.
package userdata

import (
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Formats of bootstrap data, as in the Cluster API bootstrap Secret's
// "format" key.
const (
	// FormatCloudConfig is cloud-init user data of any kind cloud-init
	// accepts: "#cloud-config", a "#!" script, a MIME multipart document...
	FormatCloudConfig = "cloud-config"
	// FormatIgnition is an Ignition JSON config, spec 2.x or 3.x.
	FormatIgnition = "ignition"
)

// Additions are what the provider adds to the user's data. The zero value adds
// nothing.
type Additions struct {
	// SSHHostKey is an OpenSSH-format (PEM "OPENSSH PRIVATE KEY") ed25519
	// private host key the guest must use, so the provider can verify the
	// guest when it connects.
	SSHHostKey []byte
	// SSHHostPublicKey is SSHHostKey's public key as an authorized_keys line.
	SSHHostPublicKey string
	// SSHUser is a user allowed to log in with SSHAuthorizedKeys and to run
	// commands as root through sudo.
	SSHUser string
	// SSHAuthorizedKeys are the authorized_keys lines SSHUser logs in with.
	SSHAuthorizedKeys []string
	// Files are written before the user's commands run: cloud-config
	// write_files, or Ignition storage files. Their paths should be the
	// provider's own: for the same path, Ignition keeps the user's file and
	// cloud-init writes the provider's last.
	Files []File
}

// File is a file the provider adds to the guest.
type File struct {
	// Path is absolute.
	Path string
	// Mode is the file's permission bits.
	Mode int
	// Contents are written as they are.
	Contents []byte
}

// Empty reports whether a adds nothing to the user's data.
func (a Additions) Empty() bool {
	return len(a.SSHHostKey) == 0 && a.SSHHostPublicKey == "" &&
		a.SSHUser == "" && len(a.SSHAuthorizedKeys) == 0 && len(a.Files) == 0
}

// hasHostKey and hasUser tell the renderers which halves to emit; validate
// has already made sure each half is complete.
func (a Additions) hasHostKey() bool { return len(a.SSHHostKey) > 0 }
func (a Additions) hasUser() bool    { return a.SSHUser != "" }

// userNameRE is deliberately narrower than what useradd accepts: the name
// also becomes a file name under /etc/sudoers.d, where sudo silently skips
// names containing a dot, and a conservative name is portable across distros.
var userNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// validate rejects half-specified additions, which would otherwise boot a
// guest the provider cannot reach or verify, and the guest would only fail
// much later and far less clearly.
func (a Additions) validate() error {
	if a.hasHostKey() != (a.SSHHostPublicKey != "") {
		return errors.New("SSHHostKey and SSHHostPublicKey must be set together")
	}
	if a.hasHostKey() {
		block, _ := pem.Decode(a.SSHHostKey)
		if block == nil || block.Type != "OPENSSH PRIVATE KEY" {
			return errors.New(`SSHHostKey is not a PEM "OPENSSH PRIVATE KEY"`)
		}
		if err := checkKeyLine("SSHHostPublicKey", a.SSHHostPublicKey); err != nil {
			return err
		}
	}
	if a.hasUser() != (len(a.SSHAuthorizedKeys) > 0) {
		return errors.New("SSHUser and SSHAuthorizedKeys must be set together")
	}
	if a.hasUser() && !userNameRE.MatchString(a.SSHUser) {
		return fmt.Errorf("SSHUser %q is not a valid user name (want %s)", a.SSHUser, userNameRE)
	}
	for i, k := range a.SSHAuthorizedKeys {
		if err := checkKeyLine(fmt.Sprintf("SSHAuthorizedKeys[%d]", i), k); err != nil {
			return err
		}
	}
	for i, f := range a.Files {
		if !strings.HasPrefix(f.Path, "/") || strings.ContainsAny(f.Path, "\r\n") {
			return fmt.Errorf("file %d: path %q is not an absolute path", i, f.Path)
		}
	}
	return nil
}

// checkKeyLine makes sure a public key is a single authorized_keys line: a
// line break would smuggle further, unintended entries into the file.
func checkKeyLine(field, line string) error {
	if strings.TrimSpace(line) == "" {
		return fmt.Errorf("%s is empty", field)
	}
	if strings.ContainsAny(line, "\r\n") {
		return fmt.Errorf("%s must be a single authorized_keys line", field)
	}
	return nil
}

// Render returns the user data the guest boots with.
//
// When add is empty, data is returned unchanged. Otherwise, for
// FormatCloudConfig the result is a MIME multipart/mixed document whose first
// part is data unchanged and whose second part is a cloud-config that can
// only add to the user's configuration (see renderCloudConfig); for
// FormatIgnition it is a parent Ignition config of the user's spec version
// that merges (3.x) or appends (2.x) data unchanged and adds the host key
// files, the user and its sudo rule.
//
// An empty format is taken as FormatCloudConfig, as Cluster API does for a
// bootstrap Secret without a "format" key. An unknown format is an error.
func Render(format string, data []byte, add Additions) ([]byte, error) {
	if format == "" {
		format = FormatCloudConfig
	}
	if format != FormatCloudConfig && format != FormatIgnition {
		return nil, fmt.Errorf("unknown bootstrap data format %q: want %q or %q",
			format, FormatCloudConfig, FormatIgnition)
	}
	if add.Empty() {
		return data, nil
	}
	if err := add.validate(); err != nil {
		return nil, fmt.Errorf("invalid user data additions: %w", err)
	}
	if format == FormatIgnition {
		return renderIgnition(data, add)
	}
	return renderCloudConfig(data, add)
}
