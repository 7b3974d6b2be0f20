// Bars are sized here, from data attributes: the page's policy allows no inline style.
for (const el of document.querySelectorAll("[data-width]")) el.style.width = el.dataset.width + "%";
for (const el of document.querySelectorAll("[data-left]")) el.style.left = el.dataset.left + "%";
setTimeout(() => location.reload(), 3000);
