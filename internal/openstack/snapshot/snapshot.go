// Package snapshot is tether's model of the two records OpenStack keeps of
// one volume attachment: Nova's block device mappings (listed per server)
// and Cinder's attachments (listed per volume and on their own). observe
// fills a Snapshot from the APIs, check decides from it, act repairs.
//
// The model holds only what decisions read; it has no behaviour beyond
// indexing, and nothing here does I/O.
package snapshot

import "time"

// Snapshot is what Nova and Cinder said at one time.
type Snapshot struct {
	// Taken is when the first list was started.
	Taken time.Time
	// Servers are Nova's servers (all projects unless narrowed).
	Servers []Server
	// Volumes are Cinder's volumes (all projects unless narrowed).
	Volumes []Volume
	// Attachments are Cinder's attachment records (block-storage 3.27),
	// in every attach status, including reserved and attaching ones that
	// a volume's own attachments list leaves out.
	Attachments []Attachment
	// Direct is what was read by ID about the objects the records above
	// name and the lists did not show.
	Direct Direct
	// NovaMaxMicroversion is the maximum compute microversion that Nova's
	// version document names ("2.100"); empty when it could not be read.
	// It tells the checks which Nova release answers, for remedies that
	// depend on it.
	NovaMaxMicroversion string
}

// Direct holds the reads by ID of the objects that one record names (the
// volume of a server's mapping, the server of a Cinder attachment, the
// attachment a mapping records) and the lists did not show. Only a 404 to
// such a read makes an object gone: the lists are narrowed to a project,
// or to what the credentials may see, and can leave out an object that
// exists.
type Direct struct {
	// Servers, Volumes and Attachments answered the read: they exist, but
	// outside what the lists showed (another project, say). The checks use
	// them as evidence and never act on them.
	Servers     []Server
	Volumes     []Volume
	Attachments []Attachment
	// Gone are the IDs whose read by ID answered 404.
	Gone map[string]bool
	// Unread are the IDs whose read by ID failed in any other way (5xx,
	// timeout, 403), with the error: whether they exist is unknown.
	Unread map[string]string
}

// MarkGone records that a read of id by ID answered 404.
func (d *Direct) MarkGone(id string) {
	if d.Gone == nil {
		d.Gone = map[string]bool{}
	}
	d.Gone[id] = true
}

// MarkUnread records that a read of id by ID failed with err.
func (d *Direct) MarkUnread(id string, err error) {
	if d.Unread == nil {
		d.Unread = map[string]string{}
	}
	d.Unread[id] = err.Error()
}

// Server is one Nova server.
type Server struct {
	ID, Name, Project string
	// Status is the API status (ACTIVE, SHUTOFF, ERROR, ...).
	Status string
	// TaskState is OS-EXT-STS:task_state; empty when none.
	TaskState string
	// VMState is OS-EXT-STS:vm_state.
	VMState string
	// RootDevice is OS-EXT-SRV-ATTR:root_device_name (admin only; may be
	// empty).
	RootDevice string
	// Volumes are the volumes Nova lists for the server (its block device
	// mappings with a volume).
	Volumes []ServerVolume
}

// ServerVolume is one block device mapping of a server with a volume, as
// `openstack server volume list` shows it.
type ServerVolume struct {
	VolumeID string
	// AttachmentID is the Cinder attachment the BDM records, and BDM the
	// BDM's uuid (compute 2.89, from os-volume_attachments); both empty
	// when that list was not read for this server.
	AttachmentID, BDM string
	// Device is the device name (e.g. /dev/vdb); empty when not read.
	Device string
}

// Volume is one Cinder volume.
type Volume struct {
	ID, Name, Project string
	// Status is the volume status (available, in-use, attaching,
	// detaching, reserved, ...).
	Status string
	// Multiattach: the volume may be attached to several servers at once.
	Multiattach bool
	// Updated is updated_at: when the status last changed, at the latest.
	Updated time.Time
}

// Attachment is one Cinder attachment record.
type Attachment struct {
	ID, VolumeID string
	// Instance is the server the attachment is for (instance_uuid).
	Instance string
	// Status is attach_status: reserved, attaching, attached, detaching,
	// error_attaching, error_detaching, detached.
	Status string
	// Connected: the attachment carries connection info (a connector was
	// given: attachment update, or create with a connector), so the
	// backend has a connection for it that deleting it terminates.
	Connected bool
}

// Index finds servers, volumes and attachments by id, those of the lists
// and those read by ID (Direct) alike.
type Index struct {
	Servers             map[string]*Server
	Volumes             map[string]*Volume
	AttachmentsByVolume map[string][]*Attachment
	Attachments         map[string]*Attachment
	// Outside are the IDs of the objects that only a read by ID showed.
	Outside map[string]bool
}

// Index builds the lookup maps of s.
func (s *Snapshot) Index() *Index {
	ix := &Index{
		Servers:             make(map[string]*Server, len(s.Servers)),
		Volumes:             make(map[string]*Volume, len(s.Volumes)),
		AttachmentsByVolume: make(map[string][]*Attachment, len(s.Attachments)),
		Attachments:         make(map[string]*Attachment, len(s.Attachments)),
		Outside:             map[string]bool{},
	}
	ix.add(s.Servers, s.Volumes, s.Attachments, false)
	ix.add(s.Direct.Servers, s.Direct.Volumes, s.Direct.Attachments, true)
	return ix
}

func (ix *Index) add(servers []Server, volumes []Volume, attachments []Attachment, outside bool) {
	for i := range servers {
		ix.Servers[servers[i].ID] = &servers[i]
		ix.outside(servers[i].ID, outside)
	}
	for i := range volumes {
		ix.Volumes[volumes[i].ID] = &volumes[i]
		ix.outside(volumes[i].ID, outside)
	}
	for i := range attachments {
		a := &attachments[i]
		ix.Attachments[a.ID] = a
		ix.AttachmentsByVolume[a.VolumeID] = append(ix.AttachmentsByVolume[a.VolumeID], a)
		ix.outside(a.ID, outside)
	}
}

func (ix *Index) outside(id string, outside bool) {
	if outside {
		ix.Outside[id] = true
	}
}

// Lists says whether the server's BDMs name the volume.
func (s *Server) Lists(volumeID string) (ServerVolume, bool) {
	for _, v := range s.Volumes {
		if v.VolumeID == volumeID {
			return v, true
		}
	}
	return ServerVolume{}, false
}
