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
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
)

// File modes, which Ignition takes as decimal JSON numbers.
const (
	modePrivateKey = 0o600
	modePublicKey  = 0o644
	modeSudoers    = 0o440
)

// Paths of the files the provider writes.
const (
	hostKeyPath    = "/etc/ssh/ssh_host_ed25519_key"
	hostPubKeyPath = hostKeyPath + ".pub"
	sudoersDir     = "/etc/sudoers.d/"
)

// specVersionRE matches Ignition spec versions such as "3.4.0" and
// "3.6.0-experimental".
var specVersionRE = regexp.MustCompile(`^([0-9]+)\.([0-9]+)\.([0-9]+)(-experimental)?$`)

// ignConfig is the parent config; it holds only what the provider adds. The
// fields used exist, with these names, from spec 2.0 on (overwrite, create
// and filesystem apply to some versions only and are omitted elsewhere).
type ignConfig struct {
	Ignition ignMeta    `json:"ignition"`
	Passwd   *ignPasswd `json:"passwd,omitempty"`
	Storage  ignStorage `json:"storage"`
}

type ignMeta struct {
	Version string     `json:"version"`
	Config  ignConfigs `json:"config"`
}

// ignConfigs references other configs: spec 3 calls it merge, spec 2 append.
type ignConfigs struct {
	Merge  []ignResource `json:"merge,omitempty"`
	Append []ignResource `json:"append,omitempty"`
}

type ignResource struct {
	Source string `json:"source"`
}

type ignStorage struct {
	Files []ignFile `json:"files"`
}

type ignFile struct {
	// Filesystem is required by spec 2 and gone in spec 3.
	Filesystem string `json:"filesystem,omitempty"`
	Path       string `json:"path"`
	// Overwrite defaults to false in spec 3, where a file already in the
	// image would then fail the boot; spec 2 overwrites by default.
	Overwrite *bool       `json:"overwrite,omitempty"`
	Mode      int         `json:"mode"`
	Contents  ignResource `json:"contents"`
}

type ignPasswd struct {
	Users []ignUser `json:"users"`
}

type ignUser struct {
	Name              string   `json:"name"`
	SSHAuthorizedKeys []string `json:"sshAuthorizedKeys"`
	// Create is how spec 2.0 asks for a user to be created; later specs
	// create missing users anyway and only deprecate it.
	Create *struct{} `json:"create,omitempty"`
}

// renderIgnition returns a parent config that pulls in data unchanged and
// adds the provider's files and user. The user's config is merged (appended)
// after the parent, so on any clash, such as the same file path, the user's
// config wins: the additions never replace what the user asked for.
func renderIgnition(data []byte, add Additions) ([]byte, error) {
	version, err := ignitionVersion(data)
	if err != nil {
		return nil, err
	}
	m := specVersionRE.FindStringSubmatch(version)
	if m == nil {
		return nil, errors.New("ignition.version in user data is not an Ignition spec version")
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if major != 2 && major != 3 {
		return nil, fmt.Errorf("unsupported Ignition spec major version %d: want 2 or 3", major)
	}

	// The user's config travels inline, so the guest needs no network
	// access and nothing else to fetch it.
	userConfig := []ignResource{{Source: dataURL(data)}}
	cfg := ignConfig{Ignition: ignMeta{Version: version}}
	if major == 3 {
		cfg.Ignition.Config.Merge = userConfig
	} else {
		cfg.Ignition.Config.Append = userConfig
	}

	file := func(path string, mode int, contents []byte) ignFile {
		f := ignFile{Path: path, Mode: mode, Contents: ignResource{Source: dataURL(contents)}}
		if major == 3 {
			overwrite := true
			f.Overwrite = &overwrite
		} else {
			f.Filesystem = "root"
		}
		return f
	}
	if add.hasHostKey() {
		cfg.Storage.Files = append(cfg.Storage.Files,
			file(hostKeyPath, modePrivateKey, add.SSHHostKey),
			file(hostPubKeyPath, modePublicKey, []byte(add.SSHHostPublicKey+"\n")))
	}
	for _, f := range add.Files {
		cfg.Storage.Files = append(cfg.Storage.Files, file(f.Path, f.Mode, f.Contents))
	}
	if add.hasUser() {
		// Ignition has no sudo setting, and group names that grant sudo
		// differ between distros (a missing group fails the boot), so the
		// rule goes into a sudoers drop-in, which they all read.
		cfg.Storage.Files = append(cfg.Storage.Files, file(sudoersDir+add.SSHUser,
			modeSudoers, []byte(add.SSHUser+" "+sudoRule+"\n")))
		user := ignUser{Name: add.SSHUser, SSHAuthorizedKeys: add.SSHAuthorizedKeys}
		if major == 2 && minor == 0 {
			user.Create = &struct{}{}
		}
		cfg.Passwd = &ignPasswd{Users: []ignUser{user}}
	}

	out, err := json.Marshal(cfg)
	if err != nil {
		return nil, errors.New("rendering the parent Ignition config failed")
	}
	return out, nil
}

// ignitionVersion reads ignition.version from the user's config. Its errors
// never quote the data (a JSON syntax error would quote the offending
// character), only where the problem is.
func ignitionVersion(data []byte) (string, error) {
	var head struct {
		Ignition struct {
			Version string `json:"version"`
		} `json:"ignition"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		var syntaxErr *json.SyntaxError
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syntaxErr):
			return "", fmt.Errorf("user data is not valid Ignition JSON: syntax error at byte offset %d", syntaxErr.Offset)
		case errors.As(err, &typeErr):
			where := "the top level"
			if typeErr.Field != "" {
				where = typeErr.Field
			}
			return "", fmt.Errorf("user data is not a valid Ignition config: wrong JSON type at %s", where)
		default:
			return "", errors.New("user data is not valid Ignition JSON")
		}
	}
	if head.Ignition.Version == "" {
		return "", errors.New("user data is not a valid Ignition config: ignition.version is missing")
	}
	return head.Ignition.Version, nil
}

// dataURL encodes contents as an RFC 2397 data URL, which every Ignition
// spec version accepts as a source.
func dataURL(contents []byte) string {
	return "data:;base64," + base64.StdEncoding.EncodeToString(contents)
}
