package dlq

// ActionDemo is an action on the simulated world of the `redrive dev` demo
// (worker/demo), such as deploying the fix of its incident. It changes no
// letter and no job, but it changes what replays will do, so it is audited
// like every other action.
const ActionDemo = "demo"
