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
}

// Index finds servers, volumes and attachments by id.
type Index struct {
	Servers             map[string]*Server
	Volumes             map[string]*Volume
	AttachmentsByVolume map[string][]*Attachment
	Attachments         map[string]*Attachment
}

// Index builds the lookup maps of s.
func (s *Snapshot) Index() *Index {
	ix := &Index{
		Servers:             make(map[string]*Server, len(s.Servers)),
		Volumes:             make(map[string]*Volume, len(s.Volumes)),
		AttachmentsByVolume: make(map[string][]*Attachment, len(s.Attachments)),
		Attachments:         make(map[string]*Attachment, len(s.Attachments)),
	}
	for i := range s.Servers {
		ix.Servers[s.Servers[i].ID] = &s.Servers[i]
	}
	for i := range s.Volumes {
		ix.Volumes[s.Volumes[i].ID] = &s.Volumes[i]
	}
	for i := range s.Attachments {
		a := &s.Attachments[i]
		ix.Attachments[a.ID] = a
		ix.AttachmentsByVolume[a.VolumeID] = append(ix.AttachmentsByVolume[a.VolumeID], a)
	}
	return ix
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
