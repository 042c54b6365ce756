//! A bounded record of what PID 1 sees during a run: the first and last entries kept, those between
//! counted. It must never grow past `2 * HALF` entries nor lose the count of what it dropped.

use std::collections::VecDeque;

/// Entries kept at each end.
pub(crate) const HALF: usize = 32;

#[derive(Debug, Clone)]
pub(crate) struct Kept<T> {
    first: Vec<T>,
    last: VecDeque<T>,
    dropped: u64,
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept { first: Vec::new(), last: VecDeque::new(), dropped: 0 }
    }
}

impl<T> Kept<T> {
    pub(crate) fn push(&mut self, item: T) {
        if self.first.len() < HALF {
            self.first.push(item);
            return;
        }
        if self.last.len() == HALF {
            self.last.pop_front();
            self.dropped += 1;
        }
        self.last.push_back(item);
    }

    /// The kept entries in the order seen, and how many between them were dropped.
    pub(crate) fn into_parts(self) -> (Vec<T>, u64) {
        let mut all = self.first;
        all.extend(self.last);
        (all, self.dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl<T> Kept<T> {
        pub(crate) fn len(&self) -> usize {
            self.first.len() + self.last.len()
        }

        pub(crate) fn is_empty(&self) -> bool {
            self.first.is_empty()
        }
    }

    #[test]
    fn keeps_the_first_and_the_last_and_counts_the_rest() {
        let mut k = Kept::default();
        for i in 0..10_000u32 {
            k.push(i);
            assert!(k.len() <= 2 * HALF);
        }
        let (kept, dropped) = k.into_parts();
        assert_eq!(kept.len(), 2 * HALF);
        assert_eq!(dropped, 10_000 - 2 * HALF as u64);
        assert_eq!(kept[0], 0);
        assert_eq!(kept[HALF - 1], HALF as u32 - 1);
        assert_eq!(kept[HALF], 10_000 - HALF as u32);
        assert_eq!(*kept.last().expect("kept"), 9_999);
    }

    #[test]
    fn below_the_bound_nothing_is_dropped() {
        let mut k = Kept::default();
        (0..40u32).for_each(|i| k.push(i));
        assert_eq!(k.into_parts(), ((0..40).collect(), 0));
    }
}
