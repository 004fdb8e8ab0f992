package dlq

// The audit actions of group changes.
const (
	ActionGroupMerge    = "group_merge"
	ActionGroupSplit    = "group_split"
	ActionGroupUnmerge  = "group_unmerge"
	ActionGroupsRebuild = "groups_rebuild"
)

// SystemActor is the actor of what Redrive does by itself: a merge of two
// groups its grouper learned to be one.
const SystemActor = "system"
