//! Gradient-boosted decision trees for the answered model
//! ([`crate::judge::open_question::answered_model`]): logistic loss, each tree fitted
//! to the gradient and curvature of the ones before (Newton leaves), splits chosen on
//! binned feature values. Deterministic: the same rows in the same order give the same
//! trees to the last digit (no sampling, ties broken by feature and bin order).

use crate::judge::open_question::answered_model::{Node, value_of};

/// How the trees are grown.
#[derive(Debug, Clone, Copy)]
pub struct BoostParams {
    pub rounds: usize,
    pub depth: usize,
    pub learning_rate: f64,
    /// L2 penalty on a leaf's value.
    pub lambda: f64,
    /// The fewest rows a leaf may hold.
    pub min_leaf: usize,
    /// At most this many cut points a feature.
    pub bins: usize,
}

impl Default for BoostParams {
    fn default() -> Self {
        BoostParams { rounds: 120, depth: 3, learning_rate: 0.05, lambda: 1.0, min_leaf: 20, bins: 32 }
    }
}

/// A fitted ensemble: `sigmoid(base + Σ tree(x))`.
#[derive(Debug, Clone, PartialEq)]
pub struct Boosted {
    pub base: f64,
    pub trees: Vec<Vec<Node>>,
}

/// The cut points of one feature: midpoints between distinct values when there are
/// few, else values at evenly spaced ranks. A row goes below cut `k` when its value is
/// less than it.
fn cut_points(values: &mut [f64], bins: usize) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    let mut distinct: Vec<f64> = values.to_vec();
    distinct.dedup();
    if distinct.len() <= bins + 1 {
        return distinct.windows(2).map(|w| round9((w[0] + w[1]) / 2.0)).collect();
    }
    let mut cuts: Vec<f64> =
        (1..=bins).map(|k| values[k * values.len() / (bins + 1)]).filter(|v| *v > values[0]).map(round9).collect();
    cuts.dedup();
    cuts
}

fn round9(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// Fits trees to `rows` (feature values, answered or not).
pub fn fit(rows: &[(Vec<f64>, bool)], params: BoostParams) -> Boosted {
    let n = rows.len();
    let width = rows.first().map_or(0, |(x, _)| x.len());
    let positives = rows.iter().filter(|(_, y)| *y).count() as f64;
    let prior = ((positives + 0.5) / (n as f64 - positives + 0.5)).ln();
    let base = round9(prior);
    let cuts: Vec<Vec<f64>> =
        (0..width).map(|f| cut_points(&mut rows.iter().map(|(x, _)| x[f]).collect::<Vec<_>>(), params.bins)).collect();
    // Each row's bin per feature: how many cuts lie at or below its value.
    let binned: Vec<Vec<u16>> = rows
        .iter()
        .map(|(x, _)| (0..width).map(|f| cuts[f].partition_point(|c| *c <= x[f]) as u16).collect())
        .collect();
    let mut score = vec![base; n];
    let mut trees = Vec::with_capacity(params.rounds);
    for _ in 0..params.rounds {
        let (gradient, hessian): (Vec<f64>, Vec<f64>) = rows
            .iter()
            .zip(&score)
            .map(|((_, y), z)| {
                let p = sigmoid(*z);
                (p - if *y { 1.0 } else { 0.0 }, (p * (1.0 - p)).max(1e-12))
            })
            .unzip();
        let grower = Grower { binned: &binned, cuts: &cuts, gradient: &gradient, hessian: &hessian, params };
        let mut tree = Vec::new();
        grower.grow(&mut tree, (0..n).collect(), 0);
        for (i, (x, _)) in rows.iter().enumerate() {
            score[i] += value_of(&tree, x);
        }
        trees.push(tree);
    }
    Boosted { base, trees }
}

struct Grower<'a> {
    binned: &'a [Vec<u16>],
    cuts: &'a [Vec<f64>],
    gradient: &'a [f64],
    hessian: &'a [f64],
    params: BoostParams,
}

impl Grower<'_> {
    /// Appends the subtree for `rows` to `tree` (preorder) and returns its index.
    fn grow(&self, tree: &mut Vec<Node>, rows: Vec<usize>, depth: usize) -> usize {
        let at = tree.len();
        let (g, h): (f64, f64) = rows.iter().fold((0.0, 0.0), |(g, h), &i| (g + self.gradient[i], h + self.hessian[i]));
        let leaf = Node::Leaf { value: round9(-g / (h + self.params.lambda) * self.params.learning_rate) };
        tree.push(leaf);
        if depth >= self.params.depth || rows.len() < 2 * self.params.min_leaf {
            return at;
        }
        let Some((feature, cut)) = self.best_split(&rows, g, h) else { return at };
        let (left, right): (Vec<usize>, Vec<usize>) =
            rows.into_iter().partition(|&i| usize::from(self.binned[i][feature]) <= cut);
        let yes = self.grow(tree, left, depth + 1);
        let no = self.grow(tree, right, depth + 1);
        tree[at] = Node::Split { feature, below: self.cuts[feature][cut], yes, no };
        at
    }

    /// The feature and cut with the largest gain, if any gains.
    fn best_split(&self, rows: &[usize], g: f64, h: f64) -> Option<(usize, usize)> {
        let lambda = self.params.lambda;
        let parent = g * g / (h + lambda);
        let mut best: Option<(f64, usize, usize)> = None;
        for (feature, cuts) in self.cuts.iter().enumerate() {
            if cuts.is_empty() {
                continue;
            }
            let mut sums = vec![(0.0_f64, 0.0_f64, 0usize); cuts.len() + 1];
            for &i in rows {
                let s = &mut sums[usize::from(self.binned[i][feature])];
                s.0 += self.gradient[i];
                s.1 += self.hessian[i];
                s.2 += 1;
            }
            let (mut gl, mut hl, mut nl) = (0.0, 0.0, 0);
            for (cut, s) in sums.iter().enumerate().take(cuts.len()) {
                gl += s.0;
                hl += s.1;
                nl += s.2;
                let nr = rows.len() - nl;
                if nl < self.params.min_leaf || nr < self.params.min_leaf {
                    continue;
                }
                let (gr, hr) = (g - gl, h - hl);
                let gain = gl * gl / (hl + lambda) + gr * gr / (hr + lambda) - parent;
                if gain > 1e-9 && best.is_none_or(|(b, _, _)| gain > b) {
                    best = Some((gain, feature, cut));
                }
            }
        }
        best.map(|(_, feature, cut)| (feature, cut))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// y is x0 > 0.5 and x1 < 0.3, with a distractor x2: the trees learn the rule and
    /// the same rows give the same trees.
    #[test]
    fn trees_learn_an_interaction_and_are_reproducible() {
        let rows: Vec<(Vec<f64>, bool)> = (0..400)
            .map(|i| {
                let x0 = f64::from(i % 20) / 20.0;
                let x1 = f64::from((i * 7) % 23) / 23.0;
                let x2 = f64::from((i * 13) % 17) / 17.0;
                (vec![x0, x1, x2], x0 > 0.5 && x1 < 0.3)
            })
            .collect();
        let params = BoostParams { rounds: 60, learning_rate: 0.3, min_leaf: 5, ..BoostParams::default() };
        let first = fit(&rows, params);
        assert_eq!(first, fit(&rows, params));
        let p = |x: &[f64]| sigmoid(first.base + first.trees.iter().map(|t| value_of(t, x)).sum::<f64>());
        assert!(p(&[0.9, 0.1, 0.5]) > 0.9, "{}", p(&[0.9, 0.1, 0.5]));
        assert!(p(&[0.9, 0.8, 0.5]) < 0.1);
        assert!(p(&[0.1, 0.1, 0.5]) < 0.1);
        let wrong = rows.iter().filter(|(x, y)| (p(x) > 0.5) != *y).count();
        assert_eq!(wrong, 0);
    }

    #[test]
    fn cut_points_are_midpoints_of_few_values_and_ranks_of_many() {
        assert_eq!(cut_points(&mut [1.0, 0.0, 1.0, 3.0], 4), vec![0.5, 2.0]);
        let mut many: Vec<f64> = (0..100).map(f64::from).collect();
        let cuts = cut_points(&mut many, 3);
        assert_eq!(cuts, vec![25.0, 50.0, 75.0]);
        assert!(cut_points(&mut [2.0, 2.0], 4).is_empty());
    }
}
