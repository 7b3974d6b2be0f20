"""A small stand-in for Fashion-MNIST, made here (no download): the demo's dataset folder.

``make_sample(folder)`` writes, once (it keeps what is there):

- ``images.u8``: ``count`` images of 28x28 bytes each (0-255, row by row), one after the other;
- ``labels.json``: ``{"labels": [class index per image], "classes": [the ten class names]}``;
- ``meta.json``: ``{"count", "shape": [28, 28], "dtype": "uint8", "files": {...}}``;
- ``README.txt``: the same in words, and how to read it without numpy.

The images are drawn shapes (a shirt is a wide block with sleeves, a trouser two legs, ...)
with seeded noise: the same bytes every time, different enough per class for a toy model.
Everything is readable by anyone who can enter the folder: who may, is the dataset's business.
"""

from __future__ import annotations

import json
import os
import random

CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
SIDE = 28
README = """Fashion-MNIST sample (made by the jupyterhub-tenancy demo, not downloaded)

{count} images, 28x28 bytes each, in images.u8 (image i is bytes i*784 .. (i+1)*784, row
by row); their classes in labels.json ("labels"[i] indexes "classes"). Read it with

    import json, os
    folder = json.loads(os.environ["TENANCY_DATASETS"])["fashion-mnist"]
    raw = open(os.path.join(folder, "images.u8"), "rb").read()
    labels = json.load(open(os.path.join(folder, "labels.json")))["labels"]
    first = [list(raw[r * 28:(r + 1) * 28]) for r in range(28)]
"""


def _shape(label: int, row: int, col: int) -> bool:
    """Whether pixel (row, col) is inside the drawn garment of class ``label``."""
    mid = abs(col - 13.5)
    if label in (0, 2, 4, 6):  # tops: a body, and sleeves as long as the class says
        sleeve = {0: 6, 2: 18, 4: 22, 6: 14}[label]
        return (4 <= row <= 24 and mid <= 7) or (4 <= row <= 4 + sleeve and mid <= 12)
    if label == 1:  # trousers: two legs
        return 3 <= row <= 25 and 3 <= mid <= 8
    if label == 3:  # a dress: wider towards the hem
        return 3 <= row <= 25 and mid <= 3 + (row - 3) * 0.4
    if label in (5, 7, 9):  # shoes: a sole, and as high as the class says
        top = {5: 18, 7: 14, 9: 6}[label]
        return (20 <= row <= 23 and col >= 3) or (top <= row <= 20 and 12 <= col <= 25)
    return (8 <= row <= 24 and mid <= 10) or (3 <= row <= 8 and 4 <= mid <= 6)  # a bag with a handle


def make_sample(folder: str, count: int = 300, seed: int = 20) -> bool:
    """Write the sample into ``folder`` unless it is there; True if it was written now."""
    if os.path.exists(os.path.join(folder, "meta.json")):
        return False
    os.makedirs(folder, exist_ok=True)
    rng = random.Random(seed)
    labels, images = [], bytearray()
    for i in range(count):
        label = i % len(CLASSES)
        labels.append(label)
        base = rng.randint(120, 230)
        for row in range(SIDE):
            for col in range(SIDE):
                inside = _shape(label, row, col)
                value = base + rng.randint(-25, 25) if inside else rng.randint(0, 18)
                images.append(max(0, min(255, value)))
    files = {"images.u8": bytes(images),
             "labels.json": json.dumps({"labels": labels, "classes": CLASSES}).encode(),
             "README.txt": README.format(count=count).encode()}
    files["meta.json"] = json.dumps({"count": count, "shape": [SIDE, SIDE], "dtype": "uint8",
                                     "files": {"images": "images.u8", "labels": "labels.json"}}).encode()
    for name, data in files.items():  # meta.json last: its presence says the sample is whole
        path = os.path.join(folder, name)
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.chmod(path + ".tmp", 0o644)  # whatever the umask: the folder decides who gets in
        os.replace(path + ".tmp", path)
    return True
