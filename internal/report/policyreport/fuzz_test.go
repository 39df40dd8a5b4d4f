package policyreport

import (
	"slices"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/report/reportapi"
)

// blockReasons are every block reason package check defines, and none.
var blockReasons = []drift.BlockReason{"",
	check.VMIMigrating, check.VMITerminating, check.VMINotRunning, check.VMTerminating, check.VMIOnlyHotplug,
	check.DeclarativeSync, check.OwnerGone, check.TenantUnreachable, check.TenantIncomplete, check.TenantNodeUnmapped,
	check.HotplugGateDisabled, check.HotplugGateUnknown, check.RemovalPending, check.AdditionPending, check.DetachInProgress,
	check.VolumeNotReady, check.VolumeNotHotpluggable, check.AttachmentPodTooYoung, check.VolumeStillListed, drift.NotRequested,
	check.NodeNotFenced, check.VolumeHeldElsewhere, check.HeldByUsers, check.FinalizerNotReleased, check.VMRunning,
	check.VolumeInUse, check.ClaimExists, check.DeletionPostponed, check.StorageExists,
}

var kinds = []string{"VirtualMachineInstance", "VirtualMachine", "Pod", "PersistentVolumeClaim", "PersistentVolume", "VolumeAttachment", "DataVolume", "Node"}

// FuzzBuild holds every report to the API's rules whatever the findings:
// results and severities from the CRDs' enums, scored exactly for
// failures, summaries that count the results, each finding in exactly one
// report (cluster-scoped subjects in the cluster report, the others in
// their namespace's), and a result that is fail only for a proven problem
// (severity warning or critical) that nothing is changing and nothing
// kept from being judged.
func FuzzBuild(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{7, 1, 0, 2, 3, 3, 200, 17, 5, 5, 5, 5, 5, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		var es []Entry
		for len(data) >= 5 {
			b := data[:5]
			data = data[5:]
			sev := []drift.Severity{drift.SeverityInfo, drift.SeverityWarning, drift.SeverityCritical, ""}[b[0]%4]
			fi := drift.Finding{
				ID: string(rune('a' + b[1]%26)), Check: check.Names()[int(b[1])%len(check.Names())],
				Namespace: []string{"", "a", "b"}[b[2]%3],
				Object:    drift.ObjectRef{Kind: kinds[int(b[3])%len(kinds)], Name: "x"},
				Severity:  sev,
				Action:    drift.Action{Safe: b[4]&1 == 1, BlockedBy: blockReasons[int(b[4]>>1)%len(blockReasons)]},
			}
			es = append(es, Entry{Finding: fi, Seen: time.Unix(int64(b[4]), 0)})
		}
		for _, api := range reportapi.All() {
			rs := Build(es, Options{API: api, Classify: check.BlockClassOf})
			total := 0
			_, clusterKind := api.Kinds()
			for _, r := range rs {
				var sum Summary
				for _, res := range r.Results {
					sum.add(res.Result)
					if !slices.Contains([]string{Pass, Fail, Warn, Error, Skip}, res.Result) || !slices.Contains([]string{Critical, High, Medium, Low, Info}, res.Severity) {
						t.Fatalf("result %q severity %q outside the CRDs' enums", res.Result, res.Severity)
					}
					if res.Scored != (res.Result == Fail) {
						t.Fatalf("scored %v for %s", res.Scored, res.Result)
					}
					ref := res.Resources[0]
					if r.Kind == clusterKind {
						if ref.Namespace != "" {
							t.Fatalf("cluster report holds namespaced %s %s/%s", ref.Kind, ref.Namespace, ref.Name)
						}
					} else if ref.Namespace != r.Metadata.Namespace || ref.Namespace == "" {
						t.Fatalf("report of %q holds %s in %q", r.Metadata.Namespace, ref.Kind, ref.Namespace)
					}
				}
				if sum != r.Summary {
					t.Fatalf("summary %+v, results count %+v", r.Summary, sum)
				}
				total += len(r.Results)
			}
			if total != len(es) {
				t.Fatalf("%d results for %d findings", total, len(es))
			}
		}
		for _, e := range es {
			fi := e.Finding
			proven := fi.Severity == drift.SeverityWarning || fi.Severity == drift.SeverityCritical
			judged := check.BlockClassOf(fi.Action.BlockedBy) == drift.Judged
			if r := ResultOf(fi, check.BlockClassOf); (r == Fail) != (proven && judged) {
				t.Fatalf("%+v: result %s", fi, r)
			}
		}
	})
}
