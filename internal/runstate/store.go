package runstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Store holds the State between runs.
type Store interface {
	// Where says where the state is, for messages ("state file F").
	Where() string
	// Lock takes the state for the run named holder until Unlock (a lock
	// left by a run that died ends by itself: the kernel's on a file, at
	// now+ttl on a record); another run's lock is an error naming it.
	Lock(ctx context.Context, holder string, now time.Time, ttl time.Duration) error
	// Load reads the state; none stored yet is an empty State.
	Load(ctx context.Context) (State, error)
	// Save stores s; only under the run's Lock.
	Save(ctx context.Context, s State) error
	Unlock(ctx context.Context) error
}

// FileStore keeps the state in a JSON file, replaced atomically (a
// temporary file beside it, synced, renamed over it), and locked through
// the file PATH.lock beside it (flock: the kernel releases it when the
// run ends, however it ends).
type FileStore struct {
	Path string
	lock *os.File
}

// Where implements Store.
func (f *FileStore) Where() string { return "state file " + f.Path }

// CheckPath says whether a state file can live at path: its directory
// must exist.
func CheckPath(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("--state-file %s: its directory %s cannot be used (%v): create it, or name a file in an existing directory", path, dir, err)
	case !st.IsDir():
		return fmt.Errorf("--state-file %s: %s is not a directory", path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("--state-file %s is a directory: name a file in it, e.g. %s", path, filepath.Join(path, "openstack-fix.json"))
	}
	return nil
}

// Lock implements Store.
func (f *FileStore) Lock(_ context.Context, holder string, now time.Time, _ time.Duration) error {
	name := f.Path + ".lock"
	lf, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("locking the %s: %v", f.Where(), err)
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		held, _ := os.ReadFile(name)
		lf.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("another run holds the lock of the %s (%s: %s): it acts now; this run changes nothing (run it again once that one ended)",
				f.Where(), name, strings.TrimSpace(string(held)))
		}
		return fmt.Errorf("locking the %s: %v", f.Where(), err)
	}
	if err := lf.Truncate(0); err == nil {
		fmt.Fprintf(lf, "%s, since %s\n", holder, now.UTC().Format(time.RFC3339))
	}
	f.lock = lf
	return nil
}

// Unlock implements Store.
func (f *FileStore) Unlock(context.Context) error {
	if f.lock == nil {
		return nil
	}
	err := f.lock.Close() // closing releases the flock
	f.lock = nil
	return err
}

// Load implements Store.
func (f *FileStore) Load(context.Context) (State, error) {
	data, err := os.ReadFile(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return State{}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("reading the %s: %v", f.Where(), err)
	}
	return decode(data, f.Where())
}

// decode reads a State's JSON; where names it in the error.
func decode(data []byte, where string) (State, error) {
	var s State
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return State{}, fmt.Errorf("the %s is not tether's run state (%v): nothing was changed; if it was damaged, move it away (the window and any trip it held are then forgotten)", where, err)
	}
	return s, nil
}

// Save implements Store: the new state is written beside the file, synced,
// and renamed over it, so a reader sees the old or the new state whole.
func (f *FileStore) Save(_ context.Context, s State) error {
	if f.lock == nil {
		return fmt.Errorf("writing the %s: not locked by this run", f.Where())
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(f.Path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.Path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing the %s: %v", f.Where(), err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing to remove
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.Path)
	}
	if err != nil {
		return fmt.Errorf("writing the %s: %v", f.Where(), err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // the rename itself, durable
		d.Close()
	}
	return nil
}
