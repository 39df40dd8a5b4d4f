package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/tether-dev/tether/internal/testing/cmdtest"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// every is a flow schema's rule that matches every resource request.
var every = flowcontrolv1.ResourcePolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, ClusterScope: true, Namespaces: []string{"*"}}

// rejectingLevel makes a priority level of the real API server that holds
// one seat or so and rejects (429 with Retry-After) whatever does not fit,
// with one flow schema per user sending the requests its rule matches
// there (and the user's non-resource requests); the flow schemas' names
// (the users') tell their rejections apart in the server's metrics.
func rejectingLevel(t *testing.T, env *testenv.Env, level string, flows map[string]flowcontrolv1.ResourcePolicyRule) {
	t.Helper()
	ctx := context.Background()
	fc := env.Client.FlowcontrolV1()
	pl := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: level},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](1),
				LendablePercent:          ptr.To[int32](0),
				BorrowingLimitPercent:    ptr.To[int32](0),
				LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
			},
		},
	}
	if _, err := fc.PriorityLevelConfigurations().Create(ctx, pl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = fc.PriorityLevelConfigurations().Delete(context.Background(), level, metav1.DeleteOptions{})
	})
	for user, rule := range flows {
		fs := &flowcontrolv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
				MatchingPrecedence:         100,
				DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
				Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
					Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: user}}},
					ResourceRules:    []flowcontrolv1.ResourcePolicyRule{rule},
					NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
				}},
			},
		}
		if _, err := fc.FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fc.FlowSchemas().Delete(context.Background(), user, metav1.DeleteOptions{}) })
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
		}
		if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
		})
	}
	// The server's configuration controller takes the new objects in.
	testenv.Eventually(t, 30*time.Second, "the flow schemas in use", func() (bool, error) {
		for user := range flows {
			got, err := fc.FlowSchemas().Get(ctx, user, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			dangling := true
			for _, c := range got.Status.Conditions {
				if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
					dangling = c.Status == flowcontrolv1.ConditionTrue
				}
			}
			if dangling {
				return false, nil
			}
		}
		return true, nil
	})
}

// nominalSeats is the API server's nominal concurrency limit of priority
// level pl, in seats.
func nominalSeats(t *testing.T, env *testenv.Env, pl string) int {
	t.Helper()
	n := 0
	testenv.Eventually(t, 30*time.Second, "the level's seats in the server's metrics", func() (bool, error) {
		n = int(metricSum(t, env, "apiserver_flowcontrol_nominal_limit_seats{", `priority_level="`+pl+`"`))
		return n > 0, nil
	})
	return n
}

// slowAdmission makes a namespace whose ConfigMap creates (dry runs too)
// a validating webhook answers after d, allowing them: a request there
// holds its seat of the API server for d at almost no CPU.
func slowAdmission(t *testing.T, env *testenv.Env, d time.Duration) string {
	t.Helper()
	ns := env.Namespace(t)
	wh := testenv.NewWebhook(t)
	cert, err := tls.LoadX509KeyPair(filepath.Join(wh.CertDir, "tls.crt"), filepath.Join(wh.CertDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", wh.Addr())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		time.Sleep(d)
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	})}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "https://" + wh.Addr() + "/slow"
	none, fail, timeout := admissionregv1.SideEffectClassNone, admissionregv1.Fail, int32(10)
	cfg := &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns + ".slow.tether.dev"},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name:                    "slow.tether.dev",
			ClientConfig:            admissionregv1.WebhookClientConfig{URL: &url, CABundle: wh.CA},
			Rules:                   []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create}, Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	vwcs := env.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := vwcs.Create(context.Background(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vwcs.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{}) })
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
	testenv.Eventually(t, 30*time.Second, "the slow webhook in use", func() (bool, error) {
		t0 := time.Now()
		_, err := env.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && time.Since(t0) >= d, err
	})
	return ns
}

// rejected is the API server's count of requests of flow schema fs that
// priority and fairness rejected.
func rejected(t *testing.T, env *testenv.Env, fs string) int {
	t.Helper()
	return int(metricSum(t, env, "apiserver_flowcontrol_rejected_requests_total{", `flow_schema="`+fs+`"`))
}

// metricSum is the sum of the API server's samples of the metric whose
// lines start with prefix and contain label.
func metricSum(t *testing.T, env *testenv.Env, prefix, label string) float64 {
	t.Helper()
	raw, err := env.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) || !strings.Contains(line, label) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		n += v
	}
	return n
}

// A good citizen under the API server's priority and fairness: while the
// priority level of its identity is full and the server answers 429 with
// Retry-After, `tether audit` waits as told and retries, and reports what
// it reports on a quiet server. The server's own count proves that the
// audit's requests were rejected. Every request, and the pages of VMIs and
// VMs alone: those tether reads with its own HTTP client (the lean pages),
// which on the old code failed the audit at the first 429.
func TestAudit_waitsOutPriorityAndFairness(t *testing.T) {
	env := testenv.Get(t)
	ns, tenantKC := seed(t, env)
	scope := []string{"-n", ns, "--tenant", "guest=" + tenantKC + ":" + ns, "-o", "json"}
	quiet := tether(t, env, "tether", append([]string{"audit"}, scope...)...)
	if quiet.Code != 1 {
		t.Fatalf("quiet audit: code %d\n%s%s", quiet.Code, quiet.Stdout, quiet.Stderr)
	}
	for _, tc := range []struct {
		name string
		rule flowcontrolv1.ResourcePolicyRule
	}{
		{"every", every},
		{"pages", flowcontrolv1.ResourcePolicyRule{Verbs: []string{"list"}, APIGroups: []string{"kubevirt.io"},
			Resources: []string{"virtualmachineinstances", "virtualmachines"}, ClusterScope: true, Namespaces: []string{"*"}}},
	} {
		t.Run(tc.name, func(t *testing.T) { throttledAudit(t, env, tc.name, tc.rule, scope, quiet.Stdout) })
	}
}

// throttledAudit runs the audit of scope as a user whose requests that
// rule matches go to a level another user fills, and compares its
// findings with those of the quiet audit.
func throttledAudit(t *testing.T, env *testenv.Env, name string, rule flowcontrolv1.ResourcePolicyRule, scope []string, quiet string) {
	auditor, load := "tether-throttled-audit-"+name, "tether-throttled-load-"+name
	rejectingLevel(t, env, "tether-test-reject-"+name, map[string]flowcontrolv1.ResourcePolicyRule{auditor: rule, load: every})
	kc := func(user string) (string, *kubernetes.Clientset) {
		cfg, err := env.Infra.UserConfig(user)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), user+".kubeconfig")
		if err := env.Infra.WriteKubeconfig(cfg, path); err != nil {
			t.Fatal(err)
		}
		cfg.QPS, cfg.Burst = -1, 0 // no client-side limit: fill the level
		return path, kubernetes.NewForConfigOrDie(cfg)
	}
	auditKC, _ := kc(auditor)
	_, loadClient := kc(load)

	// Fill the level: more concurrent requests of another user in the
	// same level than it has seats, each held for half a second by a slow
	// admission webhook (dry-run creates in this test's namespace), never
	// retried, until the server has rejected one of the audit's requests:
	// then the level empties and the audit must go on by itself.
	ns := slowAdmission(t, env, 500*time.Millisecond)
	seats := nominalSeats(t, env, "tether-test-reject-"+name)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var loadRejected atomic.Int64
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "load-"}}
	for range seats + 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := loadClient.CoreV1().RESTClient().Post().Namespace(ns).Resource("configmaps").Param("dryRun", "All").
					Body(cm).MaxRetries(0).Do(context.Background()).Error()
				if apierrors.IsTooManyRequests(err) {
					loadRejected.Add(1)
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	var stopOnce sync.Once
	stopLoad := func() { stopOnce.Do(func() { close(stop); wg.Wait() }) }
	defer stopLoad()
	testenv.Eventually(t, 30*time.Second, "the level rejecting the load", func() (bool, error) { return loadRejected.Load() > 0, nil })

	before := rejected(t, env, auditor)
	done := make(chan struct{})
	var busy cmdtest.Result
	t0 := time.Now()
	go func() {
		defer close(done)
		busy = tether(t, env, "tether", append([]string{"audit", "--kubeconfig", auditKC}, scope...)...)
	}()
	for rejectedAt := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if rejected(t, env, auditor) > before || time.Now().After(rejectedAt) {
			break
		}
	}
	stopLoad()
	<-done
	took := time.Since(t0)
	n := rejected(t, env, auditor) - before
	if busy.Code != 1 {
		t.Fatalf("audit while its priority level rejects (%d of its requests rejected): code %d\n%s%s", n, busy.Code, busy.Stdout, busy.Stderr)
	}
	if n == 0 {
		t.Fatalf("the server rejected none of the audit's requests (the load's: %d): the test proves nothing", loadRejected.Load())
	}
	if a, b := findingsOf(t, quiet), findingsOf(t, busy.Stdout); a != b {
		t.Fatalf("the throttled audit reports otherwise:\nquiet: %s\nbusy:  %s", a, b)
	}
	t.Logf("the server rejected %d of the audit's requests (429, Retry-After) and %d of the load's; the audit waited, retried and reported as on a quiet server, in %s", n, loadRejected.Load(), took.Round(time.Millisecond))
}

// findingsOf is the report's findings, re-encoded for comparison.
func findingsOf(t *testing.T, out string) string {
	t.Helper()
	var rep struct {
		Findings json.RawMessage `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	return string(rep.Findings)
}
