//! Per-key ordering: within one (endpoint, ordering key), seq n+1 waits until seq n is done.

use crate::delivery::DeliveryState;

/// What the deliveries of one (endpoint, key) allow right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyEligibility {
    /// The head is pending: it, and only it, may be sent (when its next attempt is due).
    Send(i64),
    /// The head is dead (`Failed`): the key waits until the tenant recovers, resends or skips
    /// it. Other keys are unaffected.
    Blocked { seq: i64 },
    /// The head is being sent; its successors wait for the outcome.
    InFlight(i64),
    /// The head waits for its endpoint to be enabled again; so does the rest of the key.
    Paused(i64),
    /// Everything is succeeded or skipped.
    Idle,
}

/// Finds the head of a key — the lowest seq not yet succeeded or skipped — and says what it
/// allows. Items may come in any order and seqs may have gaps (e.g. after retention).
pub fn eligibility(items: impl IntoIterator<Item = (i64, DeliveryState)>) -> KeyEligibility {
    let head = items
        .into_iter()
        .filter(|(_, state)| !matches!(state, DeliveryState::Succeeded | DeliveryState::Skipped))
        .min_by_key(|&(seq, _)| seq);
    match head {
        None => KeyEligibility::Idle,
        Some((seq, DeliveryState::Pending)) => KeyEligibility::Send(seq),
        Some((seq, DeliveryState::Sending)) => KeyEligibility::InFlight(seq),
        Some((seq, DeliveryState::Failed)) => KeyEligibility::Blocked { seq },
        Some((seq, DeliveryState::Paused)) => KeyEligibility::Paused(seq),
        // Filtered out above; listed so a new state is a compile error here.
        Some((_, DeliveryState::Succeeded | DeliveryState::Skipped)) => KeyEligibility::Idle,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DeliveryState::{Failed, Pending, Sending, Skipped, Succeeded};

    #[test]
    fn table() {
        let cases: Vec<(Vec<(i64, DeliveryState)>, KeyEligibility)> = vec![
            (vec![], KeyEligibility::Idle),
            (vec![(1, Succeeded), (2, Skipped)], KeyEligibility::Idle),
            (vec![(1, Pending), (2, Pending)], KeyEligibility::Send(1)),
            (
                vec![(1, Succeeded), (2, Pending), (3, Pending)],
                KeyEligibility::Send(2),
            ),
            // Gaps in seq are fine: the lowest outstanding is the head.
            (
                vec![(1, Succeeded), (4, Pending), (7, Pending)],
                KeyEligibility::Send(4),
            ),
            // Input order does not matter.
            (
                vec![(3, Pending), (2, Pending), (1, Succeeded)],
                KeyEligibility::Send(2),
            ),
            (
                vec![(1, Sending), (2, Pending)],
                KeyEligibility::InFlight(1),
            ),
            // A dead head blocks later seqs, even ones already pending.
            (
                vec![(1, Succeeded), (2, Failed), (3, Pending)],
                KeyEligibility::Blocked { seq: 2 },
            ),
            // Skipping the dead head unblocks the next.
            (
                vec![(1, Succeeded), (2, Skipped), (3, Pending)],
                KeyEligibility::Send(3),
            ),
            // Recovering/resending the dead head makes it pending again: it goes first.
            (
                vec![(1, Succeeded), (2, Pending), (3, Pending)],
                KeyEligibility::Send(2),
            ),
            // A failed delivery after the head does not block the head.
            (vec![(5, Pending), (6, Failed)], KeyEligibility::Send(5)),
            (
                vec![(1, Skipped), (2, Sending), (3, Failed)],
                KeyEligibility::InFlight(2),
            ),
        ];
        for (items, expected) in cases {
            assert_eq!(eligibility(items.clone()), expected, "{items:?}");
        }
    }
}
