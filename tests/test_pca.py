"""PCA with ABTT: components, the drop, and the pre-transform identity of paper 3.2."""
import numpy as np
import pytest

from swembed.pipeline.config import BuildError, PCAConfig
from swembed.pipeline.pca import check_dims, fit_pca, silhouette


def test_pca_abtt_drops_top_components_and_commutes_with_mean():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 6)) * np.array([10, 5, 3, 2, 1, 0.5])
    mean, comps, ratio = fit_pca(x)
    assert np.all(np.diff(ratio) <= 1e-12)
    kept = comps[1:4]
    transformed = (x - mean) @ kept.T
    # Pre-transforming words then averaging equals averaging then transforming (paper 3.2).
    np.testing.assert_allclose(transformed[:10].mean(0), (x[:10].mean(0) - mean) @ kept.T, atol=1e-10)
    assert abs(abs(comps[0] @ np.eye(6)[0]) - 1) < 0.01  # first PC is the high-variance axis
    with pytest.raises(BuildError, match="too large"):
        check_dims(PCAConfig(dim=384), 384)
    with pytest.raises(BuildError, match="keeps the teacher's 384"):
        check_dims(PCAConfig(level="none", dim=256), 384)
    check_dims(PCAConfig(level="none", dim=384), 384)


def test_silhouette_separates_clusters():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=(200, 5)), rng.normal(size=(200, 5)) + 20])
    labels = np.repeat([0, 1], 200)
    assert silhouette(x, labels) > 0.9
    assert abs(silhouette(rng.normal(size=(400, 5)), labels)) < 0.05
