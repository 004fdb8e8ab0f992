package dlq

// NewerCap is where CountNewer stops counting: the list only needs to say
// "N new letters", and "1,000+" says enough.
const NewerCap = 1000
