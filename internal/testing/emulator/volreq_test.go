package emulator

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	virtv1 "kubevirt.io/api/core/v1"
)

// Fixture helpers.

func pvcVol(name, claim string, hot bool) virtv1.Volume {
	return virtv1.Volume{Name: name, VolumeSource: virtv1.VolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}, Hotpluggable: hot,
	}}}
}

func dvVol(name string, hot bool) virtv1.Volume {
	return virtv1.Volume{Name: name, VolumeSource: virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: name, Hotpluggable: hot}}}
}

func disk(name string, bus virtv1.DiskBus) virtv1.Disk {
	return virtv1.Disk{Name: name, DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: bus}}}
}

func addReq(name, claim string) *virtv1.VirtualMachineVolumeRequest {
	return &virtv1.VirtualMachineVolumeRequest{AddVolumeOptions: &virtv1.AddVolumeOptions{
		Name: name, Disk: &virtv1.Disk{},
		VolumeSource: &virtv1.HotplugVolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
		}},
	}}
}

func rmReq(name string) *virtv1.VirtualMachineVolumeRequest {
	return &virtv1.VirtualMachineVolumeRequest{RemoveVolumeOptions: &virtv1.RemoveVolumeOptions{Name: name}}
}

func TestVerifyVolumeRequest(t *testing.T) {
	vols := []virtv1.Volume{pvcVol("root", "root-pvc", false), pvcVol("data", "data-pvc", true), dvVol("dv1", true)}
	cases := []struct {
		name    string
		req     *virtv1.VirtualMachineVolumeRequest
		wantErr string
	}{
		{"add new name and claim -> ok", addReq("new", "new-pvc"), ""},
		{"add existing name -> already exists", addReq("data", "other"), "Unable to add volume [data] because volume with that name already exists"},
		{"add existing claim -> source exists", addReq("other", "data-pvc"), "Unable to add volume source [data-pvc] because it already exists"},
		{"add claim named like a DataVolume -> source exists", addReq("other", "dv1"), "Unable to add volume source [dv1] because it already exists"},
		{"remove hotpluggable by name -> ok", rmReq("data"), ""},
		{"remove hotpluggable by claim name -> ok", rmReq("data-pvc"), ""},
		{"remove boot volume -> not hotpluggable", rmReq("root"), "Unable to remove volume [root] because it is not hotpluggable"},
		{"remove missing -> does not exist", rmReq("ghost"), "Unable to remove volume [ghost] because it does not exist"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := verifyVolumeRequest(vols, c.req)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case c.wantErr != "" && (err == nil || err.Error() != c.wantErr):
				t.Fatalf("error %v, want %q", err, c.wantErr)
			}
		})
	}
}

func TestApplyVolumeRequest(t *testing.T) {
	spec := &virtv1.VirtualMachineInstanceSpec{Volumes: []virtv1.Volume{pvcVol("root", "root-pvc", false)}}
	spec.Domain.Devices.Disks = []virtv1.Disk{disk("root", virtv1.DiskBusVirtio)}

	applyVolumeRequest(spec, addReq("data", "data-pvc"))
	if len(spec.Volumes) != 2 || !hotpluggable(&spec.Volumes[1]) || len(spec.Domain.Devices.Disks) != 2 || spec.Domain.Devices.Disks[1].Name != "data" {
		t.Fatalf("add -> volume and disk appended, hotpluggable: %+v", spec)
	}
	applyVolumeRequest(spec, addReq("data", "other"))
	if len(spec.Volumes) != 2 {
		t.Fatalf("add of a taken name -> no change: %+v", spec.Volumes)
	}
	applyVolumeRequest(spec, rmReq("data"))
	if len(spec.Volumes) != 1 || len(spec.Domain.Devices.Disks) != 1 {
		t.Fatalf("remove -> volume and disk dropped: %+v", spec)
	}
	applyVolumeRequest(spec, rmReq("ghost"))
	if len(spec.Volumes) != 1 {
		t.Fatalf("remove of a missing name -> no change")
	}
}

func TestQueueVolumeRequest(t *testing.T) {
	pending := []virtv1.VirtualMachineVolumeRequest{*addReq("a", "a"), *rmReq("b")}
	cases := []struct {
		name    string
		req     *virtv1.VirtualMachineVolumeRequest
		want    []string // request names in order, "+" add / "-" remove
		wantErr string
	}{
		{"add new -> appended", addReq("c", "c"), []string{"+a", "-b", "+c"}, ""},
		{"add pending add -> refused", addReq("a", "a"), nil, "add volume request for volume [a] already exists"},
		{"add pending remove -> refused", addReq("b", "b"), nil, "remove volume request for volume [b] already exists"},
		{"remove pending add -> add dropped", rmReq("a"), []string{"-b", "-a"}, ""},
		{"remove pending remove -> refused", rmReq("b"), nil, "a remove volume request for volume [b] already exists"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := queueVolumeRequest(pending, *c.req)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range got {
				if r.AddVolumeOptions != nil {
					names = append(names, "+"+r.AddVolumeOptions.Name)
				} else {
					names = append(names, "-"+r.RemoveVolumeOptions.Name)
				}
			}
			if strings.Join(names, ",") != strings.Join(c.want, ",") {
				t.Fatalf("requests %v, want %v", names, c.want)
			}
		})
	}
}

func TestTrimDoneVolumeRequests(t *testing.T) {
	tmpl := &virtv1.VirtualMachineInstanceSpec{Volumes: []virtv1.Volume{pvcVol("a", "a", true), pvcVol("half", "half", true)}}
	tmpl.Domain.Devices.Disks = []virtv1.Disk{disk("a", ""), disk("gone-vol", "")}
	pending := []virtv1.VirtualMachineVolumeRequest{
		*addReq("a", "a"),         // volume and disk present -> done
		*addReq("half", "half"),   // disk missing -> pending
		*rmReq("x"),               // both absent -> done
		*rmReq("gone-vol"),        // disk still there -> pending
		*addReq("missing", "mis"), // absent -> pending
	}
	got := trimDoneVolumeRequests(tmpl, pending)
	if len(got) != 3 || got[0].AddVolumeOptions.Name != "half" || got[1].RemoveVolumeOptions.Name != "gone-vol" || got[2].AddVolumeOptions.Name != "missing" {
		t.Fatalf("pending after trim: %+v", got)
	}
}

func TestGatesFrom(t *testing.T) {
	kv := func(enabled, disabled []string) *virtv1.KubeVirt {
		k := &virtv1.KubeVirt{}
		k.Status.Phase = virtv1.KubeVirtPhaseDeployed
		k.Spec.Configuration.DeveloperConfiguration = &virtv1.DeveloperConfiguration{FeatureGates: enabled, DisabledFeatureGates: disabled}
		return k
	}
	undeployed := kv([]string{GateHotplugVolumes}, []string{GateDeclarativeHotplugVolumes})
	undeployed.Status.Phase = ""
	cases := []struct {
		name string
		kv   *virtv1.KubeVirt
		want gates
	}{
		{"no KubeVirt -> declarative only (Beta default)", nil, gates{declarative: true}},
		{"empty lists -> declarative only", kv(nil, nil), gates{declarative: true}},
		{"HotplugVolumes listed -> both", kv([]string{GateHotplugVolumes}, nil), gates{hotplug: true, declarative: true}},
		{"declarative disabled -> none", kv(nil, []string{GateDeclarativeHotplugVolumes}), gates{}},
		{"enabled beats disabled -> declarative", kv([]string{GateDeclarativeHotplugVolumes}, []string{GateDeclarativeHotplugVolumes}), gates{declarative: true}},
		{"HotplugVolumes only -> hotplug", kv([]string{GateHotplugVolumes}, []string{GateDeclarativeHotplugVolumes}), gates{hotplug: true}},
		// configuration.go:361-385: without status.phase the CR does not count.
		{"no status.phase -> defaults", undeployed, gates{declarative: true}},
	}
	for _, c := range cases {
		if got := gatesFrom(c.kv); got != c.want {
			t.Errorf("%s: got %+v", c.name, got)
		}
	}
	if (gates{hotplug: true, declarative: true}).declarativeSync() {
		t.Error("both gates -> no declarative sync (KubeVirt skips it under HotplugVolumes)")
	}
}

func TestFaultSet(t *testing.T) {
	var s faultSet
	s.add(Fault{Count: 2, Status: 409, Subresource: subRemoveVolume}, Fault{})
	rm := call{resource: resourceVMI, ns: "ns", name: "a", sub: subRemoveVolume}
	add := call{resource: resourceVMI, ns: "ns", name: "a", sub: subAddVolume}
	if f, ok := s.take(add); !ok || f.Status != 500 {
		t.Fatalf("addvolume -> the catch-all fault with default 500, got %+v %v", f, ok)
	}
	for i := range 2 {
		if f, ok := s.take(rm); !ok || f.Status != 409 {
			t.Fatalf("removevolume %d -> 409, got %+v %v", i, f, ok)
		}
	}
	if _, ok := s.take(rm); ok || s.pending() != 0 {
		t.Fatal("faults used up -> none left")
	}
}
