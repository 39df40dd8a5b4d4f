package bundles

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/fixture"
)

// WriteLarge writes the benchmark world of tether-bench's audit (namespace
// bench, vmis VMs and their VMIs, each VMI with hotplugs hot-plugged
// volumes of which the even ones are in the VM spec) into one file as
// `kubectl get vm,vmi -A -o json` prints it: one List, written an item at a
// time so that a world of any size costs the writer one object.
func WriteLarge(path string, vmis, hotplugs int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err := w.WriteString(`{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[`); err != nil {
		f.Close()
		return err
	}
	for i := range vmis {
		for j, o := range largeOne(i, hotplugs) {
			if err := writeItem(w, o, i == 0 && j == 0); err != nil {
				f.Close()
				return err
			}
		}
	}
	if _, err := w.WriteString("]}\n"); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// largeOne is VM i of the benchmark world and its VMI.
func largeOne(i, hotplugs int) []client.Object {
	name := fmt.Sprintf("vm-%05d", i)
	var vmOpts, vmiOpts []fixture.Option
	for h := range hotplugs {
		vol := fmt.Sprintf("%s-hp%d", name, h)
		if h%2 == 0 {
			vmOpts = append(vmOpts, fixture.WithVolume(vol, fixture.PVC(vol), fixture.Hotpluggable()))
		}
		vmiOpts = append(vmiOpts, fixture.WithHotplug(vol))
	}
	vm := fixture.VM(name, append(vmOpts, fixture.InNamespace("bench"))...)
	vmi := fixture.VMI(name, append(vmiOpts, fixture.InNamespace("bench"), fixture.OwnedBy(vm))...)
	return []client.Object{vm, vmi}
}

func writeItem(w *bufio.Writer, o client.Object, first bool) error {
	it, err := typed(o)
	if err != nil {
		return err
	}
	b, err := json.Marshal(it.o)
	if err != nil {
		return err
	}
	if !first {
		if err := w.WriteByte(','); err != nil {
			return err
		}
	}
	_, err = w.Write(b)
	return err
}
