package volreq

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	virtv1 "kubevirt.io/api/core/v1"
)

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
	vols := []virtv1.Volume{PVCVolume("root", "root-pvc", false), PVCVolume("data", "data-pvc", true), DataVolumeVolume("dv1", true)}
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
			err := Verify(vols, c.req)
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
	spec := &virtv1.VirtualMachineInstanceSpec{Volumes: []virtv1.Volume{PVCVolume("root", "root-pvc", false)}}
	spec.Domain.Devices.Disks = []virtv1.Disk{Disk("root", virtv1.DiskBusVirtio)}

	Apply(spec, addReq("data", "data-pvc"))
	if len(spec.Volumes) != 2 || !Hotpluggable(&spec.Volumes[1]) || len(spec.Domain.Devices.Disks) != 2 || spec.Domain.Devices.Disks[1].Name != "data" {
		t.Fatalf("add -> volume and disk appended, hotpluggable: %+v", spec)
	}
	Apply(spec, addReq("data", "other"))
	if len(spec.Volumes) != 2 {
		t.Fatalf("add of a taken name -> no change: %+v", spec.Volumes)
	}
	Apply(spec, rmReq("data"))
	if len(spec.Volumes) != 1 || len(spec.Domain.Devices.Disks) != 1 {
		t.Fatalf("remove -> volume and disk dropped: %+v", spec)
	}
	Apply(spec, rmReq("ghost"))
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
			got, err := Queue(pending, *c.req)
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
	tmpl := &virtv1.VirtualMachineInstanceSpec{Volumes: []virtv1.Volume{PVCVolume("a", "a", true), PVCVolume("half", "half", true)}}
	tmpl.Domain.Devices.Disks = []virtv1.Disk{Disk("a", ""), Disk("gone-vol", "")}
	pending := []virtv1.VirtualMachineVolumeRequest{
		*addReq("a", "a"),         // volume and disk present -> done
		*addReq("half", "half"),   // disk missing -> pending
		*rmReq("x"),               // both absent -> done
		*rmReq("gone-vol"),        // disk still there -> pending
		*addReq("missing", "mis"), // absent -> pending
	}
	got := TrimDone(tmpl, pending)
	if len(got) != 3 || got[0].AddVolumeOptions.Name != "half" || got[1].RemoveVolumeOptions.Name != "gone-vol" || got[2].AddVolumeOptions.Name != "missing" {
		t.Fatalf("pending after trim: %+v", got)
	}
}
