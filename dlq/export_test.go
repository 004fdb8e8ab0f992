package dlq

// ClaimSQL exposes the claim query to the external tests that check its plan.
const ClaimSQL = claimSQL
