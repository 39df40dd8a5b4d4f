package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"

	"k8s.io/client-go/rest"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/check"
)

// dumpWorld writes every kind that all checks read into dir, one file a
// kind named after it, as `kubectl get KIND -A -o json > KIND.json` writes
// it: a List of the objects as the API server serves them (managedFields
// and all). It pages through each kind, so the bench holds one page at a
// time, where kubectl holds the whole list. It returns the bytes written.
func dumpWorld(ctx context.Context, cfg *rest.Config, dir string) (int64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	var ctr clients.Counter
	hc, err := rest.HTTPClientFor(unlimited(cfg, &ctr))
	if err != nil {
		return 0, err
	}
	var total int64
	for _, p := range allReads {
		n, err := dumpKind(ctx, hc, cfg.Host+p, filepath.Join(dir, path.Base(p)+".json"))
		if err != nil {
			return total, fmt.Errorf("dumping %s: %w", p, err)
		}
		total += n
	}
	return total, nil
}

// dumpKind writes the LIST at url into file as one List; a kind the server
// does not serve writes an empty one (kubectl would say it has no such
// resource; an empty List named after the kind says none exists).
func dumpKind(ctx context.Context, hc *http.Client, url, file string) (int64, error) {
	f, err := os.Create(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	cw := &countingWriter{w: f}
	w := bufio.NewWriterSize(cw, 1<<20)
	if _, err := io.WriteString(w, `{"apiVersion":"v1","items":[`); err != nil {
		return 0, err
	}
	first := true
	_, err = pagesOf(ctx, hc, url, mediaJSON, 500, func(body []byte) error {
		var page struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return err
		}
		for _, it := range page.Items {
			if !first {
				if err := w.WriteByte(','); err != nil {
					return err
				}
			}
			first = false
			if _, err := w.Write(it); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if _, err := io.WriteString(w, `],"kind":"List","metadata":{"resourceVersion":""}}`+"\n"); err != nil {
		return 0, err
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return cw.n, f.Close()
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// offline are the jobs of `tether audit --from` the dump in dir, beside
// the live ones: the same checks and outputs.
func offline(bin, dir string) []contestant {
	return []contestant{
		binary(bin, "--from dump, one check -o json", "--from", dir, "--checks", check.OrphanHotplugVolume, "-o", "json"),
		binary(bin, "--from dump, all checks -o json", "--from", dir, "-o", "json"),
	}
}
