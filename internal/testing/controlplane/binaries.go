package controlplane

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// EnvBinDir names the environment variable that points at a directory holding
// etcd, kube-apiserver and kube-controller-manager.
const EnvBinDir = "TETHER_CONTROLPLANE_BIN"

var binaryNames = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

var verified sync.Map // bin dir -> error (nil when good)

// findBinDir returns the directory of control-plane binaries: the explicit
// option, then $TETHER_CONTROLPLANE_BIN, then the cache entry that
// hack/controlplane.sh reports for this checkout.
func findBinDir(explicit string) (string, error) {
	dir := explicit
	if dir == "" {
		dir = os.Getenv(EnvBinDir)
	}
	if dir == "" {
		script, err := buildScript()
		if err != nil {
			return "", err
		}
		out, err := exec.Command(script, "--verify").Output()
		if err != nil {
			return "", fmt.Errorf("control-plane binaries are not built for this checkout: run `make controlplane` (the first build takes about 10-15 minutes), or set %s", EnvBinDir)
		}
		dir = strings.TrimSpace(string(out))
	}
	if v, ok := verified.Load(dir); ok {
		if v == nil {
			return dir, nil
		}
		return "", v.(error)
	}
	err := verifyBinDir(dir)
	verified.Store(dir, err)
	if err != nil {
		return "", err
	}
	return dir, nil
}

// verifyBinDir checks that every binary is present and executable and, when
// the cache entry has a SHA256SUMS file beside it, that its checksum matches.
func verifyBinDir(dir string) error {
	for _, name := range binaryNames {
		st, err := os.Stat(filepath.Join(dir, name))
		switch {
		case err != nil:
			return fmt.Errorf("control-plane binary %s missing in %s: run `make controlplane` to build it (or fix %s)", name, dir, EnvBinDir)
		case st.Mode()&0o111 == 0 || st.Size() == 0:
			return fmt.Errorf("control-plane binary %s in %s is not an executable file: remove %s and run `make controlplane`", name, dir, filepath.Dir(dir))
		}
	}
	sums, err := readSums(filepath.Join(filepath.Dir(dir), "SHA256SUMS"))
	if errors.Is(err, os.ErrNotExist) {
		return nil // a hand-made directory: trust it
	}
	if err != nil {
		return err
	}
	for _, name := range binaryNames {
		got, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if want, ok := sums[name]; !ok || want != got {
			return fmt.Errorf("control-plane cache entry %s is corrupt (%s checksum mismatch): remove it and run `make controlplane` to rebuild", filepath.Dir(dir), name)
		}
	}
	return nil
}

func readSums(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 {
			sums[strings.TrimPrefix(fields[1], "*")] = fields[0]
		}
	}
	return sums, sc.Err()
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// buildScript finds hack/controlplane.sh by walking up from the working
// directory to the module root (tests run inside package directories).
func buildScript() (string, error) {
	p, err := FindScript("controlplane.sh")
	if err != nil {
		return "", fmt.Errorf("control-plane binaries not found: set %s to a directory with %s, or run from a tether checkout after `make controlplane`", EnvBinDir, strings.Join(binaryNames, ", "))
	}
	return p, nil
}

// FindScript finds hack/<name> by walking up from the working directory
// to the checkout's root.
func FindScript(name string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		candidate := filepath.Join(dir, "hack", name)
		if _, err := os.Stat(candidate); err == nil {
			return candidate, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("hack/%s not found above %s", name, dir)
		}
		dir = parent
	}
}
