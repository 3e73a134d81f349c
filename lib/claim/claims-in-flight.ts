/**
 * Most claim commands one worker keeps in flight at once while work is due and slots are free. Each claim is its
 * own atomic `findOneAndUpdate`, so claims in flight can never take the same row; more than a few buy nothing,
 * because they all contend for the first due rows of the same index range (a real server retries the conflicting
 * writes) and each holds a pooled connection that renewals and outcome writes also need.
 */
export const MAX_CLAIMS_IN_FLIGHT = 8;
