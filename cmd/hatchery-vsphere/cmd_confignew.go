package main

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// newRSAKeyBits is the size of the key `config new` generates: the key
// signs worker tokens (RS512), which the API checks with the public key
// the hatchery registers; 2048 bits is the smallest size considered safe
// and keeps the generation under a second on a small machine.
const newRSAKeyBits = 2048

// minRSAKeyBits is the smallest key `config new --rsa-key FILE` accepts
// from an existing file.
const minRSAKeyBits = 2048

// rsaKeyLine is the line of the reference configuration that
// --rsa-key-inline replaces with the key.
var rsaKeyLine = []byte("\n    rsaPrivateKey = \"\"\n")

// cmdConfigNew is `config new [--rsa-key FILE] [--rsa-key-inline]`: the
// reference configuration on stdout; with --rsa-key, FILE holds the RSA
// key signing worker tokens (generated, mode 0600, when FILE does not
// exist; checked when it does); with --rsa-key-inline the key (FILE's, or
// a new one) is written into the printed configuration instead, as
// upstream's `engine config new` does. What it says about the key goes to
// stderr and never holds the key.
func (a *app) cmdConfigNew(args []string) int {
	fs := a.flagSet("config new")
	keyPath := fs.String("rsa-key", "", "file holding the PEM RSA private key that signs worker tokens: generated (mode 0600) when it does not exist, checked when it does; hand it to the service as the systemd credential rsa-private-key or CDS_HATCHERY_VSPHERE_RSA_PRIVATE_KEY_FILE")
	inline := fs.Bool("rsa-key-inline", false, "write the RSA key (--rsa-key's, else a new one) into the printed configuration's rsaPrivateKey (the file is then a secret)")
	if fs.Parse(args) != nil || fs.NArg() > 0 {
		return exitUsage
	}
	out := config.ReferenceConfig()
	var keyPEM []byte
	if *keyPath != "" {
		k, created, err := rsaKeyFile(*keyPath)
		if err != nil {
			fmt.Fprintf(a.stderr, "config new: %v\n", err)
			return exitFail
		}
		if created {
			fmt.Fprintf(a.stderr, "config new: wrote a new %d-bit RSA key to %s (mode 0600)\n", newRSAKeyBits, *keyPath)
		} else {
			fmt.Fprintf(a.stderr, "config new: %s holds a %d-bit RSA key, kept as is\n", *keyPath, k.N.BitLen())
		}
		keyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	}
	if *inline {
		if keyPEM == nil {
			k, err := rsa.GenerateKey(rand.Reader, newRSAKeyBits)
			if err != nil {
				fmt.Fprintf(a.stderr, "config new: generate an rsa key: %v\n", err)
				return exitFail
			}
			keyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
		}
		if bytes.Count(out, rsaKeyLine) != 1 {
			fmt.Fprint(a.stderr, "config new: the reference configuration has no single empty rsaPrivateKey line\n")
			return exitFail
		}
		// A TOML multi-line literal string: the PEM text as is, line breaks kept.
		out = bytes.Replace(out, rsaKeyLine, []byte("\n    rsaPrivateKey = '''\n"+string(keyPEM)+"'''\n"), 1)
	}
	if _, err := a.stdout.Write(out); err != nil {
		fmt.Fprintf(a.stderr, "config new: %v\n", err)
		return exitFail
	}
	return exitOK
}

// rsaKeyFile returns the RSA key in path, generated and written there
// (mode 0600, never over an existing file) when path does not exist;
// created says which. Its errors name the file, never its content.
func rsaKeyFile(path string) (key *rsa.PrivateKey, created bool, err error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		k, perr := hatchery.ParseRSAPrivateKey(string(b))
		if perr != nil {
			return nil, false, fmt.Errorf("rsa key %s: %w", path, perr)
		}
		if k.N.BitLen() < minRSAKeyBits {
			return nil, false, fmt.Errorf("rsa key %s: %d bits, want at least %d", path, k.N.BitLen(), minRSAKeyBits)
		}
		return k, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, false, fmt.Errorf("rsa key: %w", err)
	}
	k, err := rsa.GenerateKey(rand.Reader, newRSAKeyBits)
	if err != nil {
		return nil, false, fmt.Errorf("generate an rsa key for %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("rsa key: %w", err)
	}
	_, werr := f.Write(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(path)
		return nil, false, fmt.Errorf("rsa key: write %s: %w", path, err)
	}
	return k, true, nil
}
