package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// DeepCopyInto copies f into out.
func (f *Finding) DeepCopyInto(out *Finding) {
	*out = *f
	out.TypeMeta = f.TypeMeta
	f.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = f.Spec
	f.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of f.
func (f *Finding) DeepCopy() *Finding {
	if f == nil {
		return nil
	}
	out := new(Finding)
	f.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (f *Finding) DeepCopyObject() runtime.Object { return f.DeepCopy() }

// DeepCopyInto copies s into out.
func (s *FindingStatus) DeepCopyInto(out *FindingStatus) {
	*out = *s
	out.FirstObserved = s.FirstObserved.DeepCopy()
	out.LastObserved = s.LastObserved.DeepCopy()
	out.SafeSince = s.SafeSince.DeepCopy()
	out.ActAfter = s.ActAfter.DeepCopy()
	out.LastAttempt = s.LastAttempt.DeepCopy()
	out.ResolvedAt = s.ResolvedAt.DeepCopy()
	out.NodeGoneSince = s.NodeGoneSince.DeepCopy()
	if s.Evidence != nil {
		out.Evidence = append([]string(nil), s.Evidence...)
	}
}

// DeepCopyInto copies l into out.
func (l *FindingList) DeepCopyInto(out *FindingList) {
	*out = *l
	out.TypeMeta = l.TypeMeta
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Finding, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of l.
func (l *FindingList) DeepCopy() *FindingList {
	if l == nil {
		return nil
	}
	out := new(FindingList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *FindingList) DeepCopyObject() runtime.Object { return l.DeepCopy() }

// DeepCopy returns a copy of s.
func (s *FindingStatus) DeepCopy() *FindingStatus {
	if s == nil {
		return nil
	}
	out := new(FindingStatus)
	s.DeepCopyInto(out)
	return out
}
