package bundle

import (
	"fmt"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// page gathers a bundle's VMIs or VMs, as they are read, into a page of
// the live audit's page size, decoded as the live audit decodes a page
// (observe.Decoder): a bundle of 100,000 VMIs then costs the memory a live
// audit's pages do, laid out as theirs, and not that of 200,000 objects
// decoded one by one, each leaving its wire form among the objects kept.
type page struct {
	k     *kind
	body  []byte
	items []pageItem
}

// pageItem is where one object of a page came from, and its bytes in the
// page's body.
type pageItem struct {
	file       string
	doc        int
	ns, name   string
	start, end int
}

// add appends one object's JSON to the page.
func (p *page) add(file string, doc int, h *header, raw []byte) {
	if len(p.items) == 0 {
		p.body = append(p.body[:0], `{"items":[`...)
	} else {
		p.body = append(p.body, ',')
	}
	start := len(p.body)
	p.body = append(p.body, raw...)
	p.items = append(p.items, pageItem{file: file, doc: doc, ns: h.Metadata.Namespace, name: h.Metadata.Name, start: start, end: len(p.body)})
}

// flushAll decodes what is gathered: at the end of each file (so that two
// copies of one object, in two files, are compared in the order read) and
// of the bundle.
func (d *decoder) flushAll() {
	d.flush(&d.vmiPage)
	d.flush(&d.vmPage)
}

// flush decodes the page and keeps its objects. When the page does not
// decode, each object is decoded alone, and each that does not is
// skipped, saying why.
func (d *decoder) flush(p *page) {
	if len(p.items) == 0 {
		return
	}
	p.body = append(p.body, "]}"...)
	i := 0
	var err error
	switch p.k.gvk.Kind {
	case "VirtualMachineInstance":
		err = d.wire.VMIs(p.body, func(v snapshot.VMI) { d.keepVMI(p, &p.items[i], v); i++ })
	case "VirtualMachine":
		err = d.wire.VMs(p.body, func(v snapshot.VM) { d.keepVM(p, &p.items[i], v); i++ })
	}
	if err != nil {
		for j := range p.items {
			d.flushOne(p, &p.items[j])
		}
	}
	clear(p.items)
	p.items = p.items[:0]
}

// flushOne decodes one object of a page that did not decode as a whole.
func (d *decoder) flushOne(p *page, it *pageItem) {
	body := append([]byte(`{"items":[`), p.body[it.start:it.end]...)
	body = append(body, "]}"...)
	var err error
	switch p.k.gvk.Kind {
	case "VirtualMachineInstance":
		err = d.wire.VMIs(body, func(v snapshot.VMI) { d.keepVMI(p, it, v) })
	case "VirtualMachine":
		err = d.wire.VMs(body, func(v snapshot.VM) { d.keepVM(p, it, v) })
	}
	if err != nil {
		d.skip(it.file, fmt.Sprintf("%s %s/%s does not decode as %s: %v", p.k.gvk.Kind, it.ns, it.name, p.k.gvk.GroupVersion(), err), false)
	}
}

func (d *decoder) keepVMI(p *page, it *pageItem, v snapshot.VMI) {
	d.keep(p.k, v.Namespace, v.Name, v.ResourceVersion, func(s *store, i int) { s.vmis.put(i, v) })
	d.facts.seen(it.file, p.k, v.Namespace)
}

func (d *decoder) keepVM(p *page, it *pageItem, v snapshot.VM) {
	d.keep(p.k, v.Namespace, v.Name, v.ResourceVersion, func(s *store, i int) { s.vms.put(i, v) })
	d.facts.seen(it.file, p.k, v.Namespace)
}
