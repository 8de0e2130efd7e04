package revision

// Write is what one write of a workload means for its revision, where
// revisions are on.
type Write struct {
	// Create is true for a create: nothing to roll back from.
	Create bool
	// Now and NowSnapshots are the hash and snapshots the config gives now.
	Now, NowSnapshots string
	// Written and WrittenSnapshots are what the write's template carries;
	// Stored what the stored template carried.
	Written, WrittenSnapshots, Stored string
	// Marker is the rolled-back-from hash the written workload carries.
	Marker string
	// TemplateChanged says the template changed beyond configward's own
	// annotations: the pipeline wrote a new revision.
	TemplateChanged bool
	// Restorable says Written with WrittenSnapshots is a revision of the
	// workload (one of its ReplicaSets or ControllerRevisions carries it)
	// whose snapshots all exist.
	Restorable bool
}

// Stamp is what the template and the workload carry after the write.
type Stamp struct {
	Hash, Snapshots string
	// Marker is the rolled-back-from hash to keep on the workload, "" for
	// none.
	Marker string
	// RolledBack: this write is a rollback to a revision with snapshots.
	RolledBack bool
}

// Next decides the stamp of a write. A rollback (kubectl rollout undo
// copies an earlier revision's template, with its hash) to a revision
// whose snapshots exist is kept, and the workload records the hash it was
// rolled back from. Later writes keep it while the config still gives that
// hash and the template does not change; a config change, or a new
// revision from the pipeline, moves it on to the config of now.
func Next(w Write) Stamp {
	now := Stamp{Hash: w.Now, Snapshots: w.NowSnapshots}
	switch {
	case w.Create || w.Now == "":
		return now
	case w.Written != "" && w.Written != w.Stored && w.Written != w.Now && w.Restorable:
		return Stamp{Hash: w.Written, Snapshots: w.WrittenSnapshots, Marker: w.Now, RolledBack: true}
	case w.Marker != "" && w.Marker == w.Now && w.Written == w.Stored && !w.TemplateChanged:
		return Stamp{Hash: w.Written, Snapshots: w.WrittenSnapshots, Marker: w.Marker}
	}
	return now
}
