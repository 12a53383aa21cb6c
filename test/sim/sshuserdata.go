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

package sim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/url"
	"strings"

	"golang.org/x/crypto/ssh"
	"sigs.k8s.io/yaml"
)

// guestCredentials is what the guest's user data configures for sshd.
type guestCredentials struct {
	hostKey    ssh.Signer
	authorized map[string]map[string]bool // user -> keys in SSH wire format
}

// readCredentials reads the host key and authorized keys from user data as
// cloud-init or Ignition would apply them. Unreadable parts are skipped: the
// guest would not apply them either.
func readCredentials(data *Bootstrap) guestCredentials {
	creds := guestCredentials{authorized: map[string]map[string]bool{}}
	if data.Format == "ignition" {
		creds.readIgnition(data.Data)
	} else {
		creds.readCloudInit(data.Data)
	}
	return creds
}

func (c *guestCredentials) authorize(user string, keys []string) {
	for _, line := range keys {
		key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if user == "" || err != nil {
			continue
		}
		if c.authorized[user] == nil {
			c.authorized[user] = map[string]bool{}
		}
		c.authorized[user][string(key.Marshal())] = true
	}
}

// setHostKey installs a host key; later parts and merged configs replace
// earlier ones, as both tools' merging does.
func (c *guestCredentials) setHostKey(pemData []byte) {
	if signer, err := ssh.ParsePrivateKey(pemData); err == nil {
		c.hostKey = signer
	}
}

// walkCloudInit visits the documents of cloud-init user data: multipart
// documents part by part (nested ones too, base64 parts decoded), each
// leaf with its content type. An empty contentType means bare user data,
// classified by its start as cloud-init does.
func walkCloudInit(body []byte, contentType string, params map[string]string, depth int, visit func(body []byte, contentType string)) {
	if depth > maxUserDataDepth {
		return
	}
	start := strings.ToLower(strings.TrimLeft(string(body), " \t\r\n"))
	switch {
	case strings.HasPrefix(contentType, "multipart/"):
		r := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			// NextPart undoes quoted-printable; base64 is left to us.
			part, err := r.NextPart()
			if err != nil {
				return
			}
			ct, ps, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
			if b, err := decodeTransfer(part.Header.Get("Content-Transfer-Encoding"), part); err == nil {
				walkCloudInit(b, ct, ps, depth+1, visit)
			}
		}
	case contentType == "" && (strings.HasPrefix(start, "content-type:") || strings.HasPrefix(start, "mime-version:")):
		msg, err := mail.ReadMessage(bytes.NewReader(body))
		if err != nil {
			return
		}
		ct, ps, _ := mime.ParseMediaType(msg.Header.Get("Content-Type"))
		if b, err := decodeTransfer(msg.Header.Get("Content-Transfer-Encoding"), msg.Body); err == nil && ct != "" {
			walkCloudInit(b, ct, ps, depth+1, visit)
		}
	default:
		visit(body, contentType)
	}
}

// readCloudInit reads the cloud-config documents of user data for
// ssh_keys and users.
func (c *guestCredentials) readCloudInit(body []byte) {
	walkCloudInit(body, "", nil, 0, func(doc []byte, contentType string) {
		start := strings.ToLower(strings.TrimLeft(string(doc), " \t\r\n"))
		sniffed := contentType == "" || contentType == "text/x-not-multipart" || contentType == "text/plain"
		if contentType == "text/cloud-config" || sniffed && strings.HasPrefix(start, "#cloud-config") {
			c.readCloudConfig(doc)
		}
	})
}

func decodeTransfer(encoding string, r io.Reader) ([]byte, error) {
	if strings.EqualFold(strings.TrimSpace(encoding), "base64") {
		// This decoder skips the line breaks of wrapped base64.
		r = base64.NewDecoder(base64.StdEncoding, r)
	}
	return io.ReadAll(r)
}

func (c *guestCredentials) readCloudConfig(body []byte) {
	var doc struct {
		SSHKeys struct {
			Ed25519Private string `json:"ed25519_private"`
		} `json:"ssh_keys"`
		// Entries are names ("default") or user dicts.
		Users []any `json:"users"`
	}
	if yaml.Unmarshal(body, &doc) != nil {
		return
	}
	if doc.SSHKeys.Ed25519Private != "" {
		c.setHostKey([]byte(doc.SSHKeys.Ed25519Private))
	}
	for _, u := range doc.Users {
		user, _ := u.(map[string]any)
		name, _ := user["name"].(string)
		list, _ := user["ssh_authorized_keys"].([]any)
		var keys []string
		for _, k := range list {
			if line, ok := k.(string); ok {
				keys = append(keys, line)
			}
		}
		c.authorize(name, keys)
	}
}

// guestIgnition is the part of an Ignition config (spec 2 or 3) the guest
// acts on.
type guestIgnition struct {
	Ignition struct {
		Config struct{ Merge, Append []ignitionSource }
	}
	Storage struct {
		Files []struct {
			Path     string
			Contents ignitionSource
		}
	}
	Passwd struct {
		Users []struct {
			Name              string
			SSHAuthorizedKeys []string `json:"sshAuthorizedKeys"`
		}
	}
}

type ignitionSource struct {
	Source string `json:"source"`
}

// walkIgnition visits an Ignition config, then the configs it merges (spec
// 3) or appends (spec 2) from data URLs, in the order Ignition applies
// them: merged configs come after their parent, so they win. A guest
// without network could fetch no other source.
func walkIgnition(data []byte, depth int, visit func(cfg *guestIgnition, raw []byte)) {
	var cfg guestIgnition
	if depth > maxUserDataDepth || json.Unmarshal(data, &cfg) != nil {
		return
	}
	visit(&cfg, data)
	for _, src := range append(cfg.Ignition.Config.Merge, cfg.Ignition.Config.Append...) {
		if child, err := decodeDataURL(src.Source); err == nil {
			walkIgnition(child, depth+1, visit)
		}
	}
}

// readIgnition reads the host key file and the users of an Ignition config
// and of the configs it merges or appends.
func (c *guestCredentials) readIgnition(data []byte) {
	walkIgnition(data, 0, func(cfg *guestIgnition, _ []byte) {
		for _, f := range cfg.Storage.Files {
			if key, err := decodeDataURL(f.Contents.Source); err == nil && f.Path == "/etc/ssh/ssh_host_ed25519_key" {
				c.setHostKey(key)
			}
		}
		for _, u := range cfg.Passwd.Users {
			c.authorize(u.Name, u.SSHAuthorizedKeys)
		}
	})
}

// decodeDataURL decodes an RFC 2397 data URL: percent-encoded, and base64
// when ";base64" ends its metadata.
func decodeDataURL(u string) ([]byte, error) {
	rest, isData := strings.CutPrefix(u, "data:")
	meta, payload, hasComma := strings.Cut(rest, ",")
	if !isData || !hasComma {
		return nil, errors.New("not a data URL")
	}
	text, err := url.PathUnescape(payload)
	if err != nil || !strings.HasSuffix(strings.ToLower(meta), ";base64") {
		return []byte(text), err
	}
	return base64.StdEncoding.DecodeString(text)
}
